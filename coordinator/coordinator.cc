#include "coordinator/coordinator.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/coordinator_internal.h"
#include "coordinator/step_traces.h"
#include "core/planning/explain.h"
#include "core/ops/graph.h"
#include "core/ops/layout_names.h"
#include "util/logging.h"
#include "core/lowering/lowering.h"
#include "core/ir/slicing.h"
#include "util/status_macros.h"
#include "core/train/training_spec.h"
#include "rpc/auth.h"
#include "rpc/tensor_chunks.h"
#include "rpc/tensor_region.h"
#include "rpc/wire_buffers.h"
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_store.h"

namespace meshrt {

using coordinator_internal::CoordString;
using coordinator_internal::IsTransportFailure;
using coordinator_internal::ParallelFor;

namespace {

KeyValueStoreOptions CoordinatorKvOptions(KeyValueStoreOptions kv) {
  kv.require_prefix = true;
  return kv;
}

// per_processor * n, or `cap` when that is smaller (and without overflowing).
int64_t SessionQuota(int64_t per_processor, int n, int64_t cap) {
  return per_processor > cap / n ? cap : per_processor * n;
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, WorkerClientFactory* workers)
    : options_(options),
      factory_(workers),
      kv_(CoordinatorKvOptions(options.kv)),
      profile_(options.profile) {
  absl::StatusOr<std::string> token = RandomToken();
  incarnation_ = token.ok() ? token->substr(0, 16) : absl::StrCat(absl::ToUnixNanos(absl::Now()));
  metrics_.registry().AddCollector([this] { CollectMetrics(); });
  reaper_ = std::thread([this] { ReaperLoop(); });
}

Coordinator::~Coordinator() {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, s] : sessions_) sessions.push_back(s);
    sessions_.clear();
  }
  reaper_.join();
  for (auto& s : sessions) ReleaseSession(s);
}

void Coordinator::ReaperLoop() {
  while (true) {
    std::vector<std::shared_ptr<Session>> to_release;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100))) return;
      const absl::Time now = absl::Now();
      std::vector<int> silent;
      for (const auto& [id, w] : workers_) {
        if (now - w->last_heartbeat > options_.heartbeat_timeout) silent.push_back(id);
      }
      for (int id : silent) {
        const std::string session = workers_[id]->session;
        metrics_.HeartbeatTimeout();
        metrics_.HeartbeatsMissed(MissedIntervals(now - workers_[id]->last_heartbeat));
        DropWorkerLocked(id, absl::StrCat("is not responding (no heartbeat for ",
                                          ShortDuration(now - workers_[id]->last_heartbeat),
                                          ", over --heartbeat_timeout_ms=",
                                          absl::ToInt64Milliseconds(options_.heartbeat_timeout),
                                          "; the process may be stopped or hung, or its network "
                                          "failed)"));
        auto it = sessions_.find(session);
        if (it != sessions_.end()) to_release.push_back(it->second);
      }
      ExpireLeasesLocked(now, &to_release);
    }
    for (auto& s : to_release) ReleaseSession(s);
  }
}

int64_t Coordinator::MissedIntervals(absl::Duration gap) const {
  if (options_.heartbeat_interval <= absl::ZeroDuration()) return 0;
  return std::max<int64_t>(0, gap / options_.heartbeat_interval - 1);
}

void Coordinator::DropWorkerLocked(int id, const std::string& why) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  const WorkerEntry& w = *it->second;
  LogWarning("coordinator: dropping worker ", id, " (", w.address, "): ", why);
  {
    // For the dashboard: the worker as last seen, marked lost, and the error.
    WorkerSnapshot lost;
    lost.id = id;
    lost.rank = w.rank;
    lost.address = w.address;
    lost.gloo_address = w.gloo_address;
    lost.state = "lost";
    lost.session = w.session;
    lost.coordinate = w.coordinate;
    lost.activity = w.activity;
    lost.lost_why = why;
    lost.lost_at = absl::Now();
    lost.heartbeat_age_ms = absl::ToInt64Milliseconds(lost.lost_at - w.last_heartbeat);
    lost_workers_.push_front(std::move(lost));
    while (lost_workers_.size() > 64) lost_workers_.pop_back();
    errors_.Add(w.session, absl::StrCat("worker ", id, " (", w.address, ") dropped: it ", why));
  }
  auto s = sessions_.find(w.session);
  if (!w.session.empty() && s != sessions_.end()) {
    FailSessionLocked(s->second.get(), absl::UnavailableError(absl::StrCat(
                                           "worker ", id, " (", w.address, ", mesh coordinate ",
                                           CoordString(w.coordinate), ") ", why)));
  }
  workers_.erase(it);
}

void Coordinator::FailSessionLocked(Session* session, const absl::Status& why) {
  if (session->failed.ok()) session->failed = why;
  if (session->cancel != nullptr) session->cancel->Cancel();
}

void Coordinator::ReleaseSession(const std::shared_ptr<Session>& session) {
  std::vector<std::shared_ptr<WorkerClient>> live;
  std::string kv_prefix;
  {
    absl::MutexLock lock(&mu_);
    if (session->released) return;
    session->released = true;
    kv_prefix = session->kv_prefix;
    for (int id : session->worker_ids) {
      auto it = workers_.find(id);
      if (it != workers_.end() && it->second->session == session->id) {
        it->second->session.clear();
        it->second->coordinate.clear();
        live.push_back(it->second->client);
      }
    }
  }
  // First, so that workers still waiting in a rendezvous of this session fail at once.
  if (!kv_prefix.empty()) kv_.DeletePrefix(kv_prefix);
  ParallelFor(static_cast<int>(live.size()), [&](int i) {
    absl::Status s = live[i]->CloseSession(session->id, absl::Seconds(5));
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) {
      LogWarning("coordinator: closing session ", session->id, " on a worker: ", s.message());
    }
  });
}

absl::StatusOr<v1::RegisterWorkerResponse> Coordinator::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  if (request.address().empty() || request.incarnation().empty()) {
    return absl::InvalidArgumentError("worker registration needs an address and an incarnation id");
  }
  if (request.secret().size() < 16) {
    return absl::InvalidArgumentError(
        "worker registration needs the worker's secret (16 characters or more): the coordinator "
        "presents it on every call to the worker");
  }
  std::shared_ptr<WorkerClient> client = factory_->Connect(request.address(), request.secret());
  std::vector<std::shared_ptr<Session>> to_release;
  v1::RegisterWorkerResponse response;
  {
    absl::MutexLock lock(&mu_);
    std::vector<int> replaced;
    for (const auto& [id, w] : workers_) {
      if (w->address == request.address()) replaced.push_back(id);
    }
    for (int id : replaced) {
      const std::string session = workers_[id]->session;
      DropWorkerLocked(id, "registered again (the process restarted)");
      auto it = sessions_.find(session);
      if (it != sessions_.end()) to_release.push_back(it->second);
    }
    // A worker back at a lost one's address replaces it on the dashboard.
    lost_workers_.erase(std::remove_if(lost_workers_.begin(), lost_workers_.end(),
                                       [&](const WorkerSnapshot& lost) {
                                         return lost.address == request.address();
                                       }),
                        lost_workers_.end());
    auto entry = std::make_unique<WorkerEntry>();
    entry->id = next_worker_id_++;
    entry->address = request.address();
    entry->gloo_address = request.gloo_address();
    entry->incarnation = request.incarnation();
    entry->rank = request.has_rank() ? request.rank() : -1;
    entry->available_memory_bytes = std::max<int64_t>(request.available_memory_bytes(), 0);
    entry->last_heartbeat = absl::Now();
    entry->client = std::move(client);
    response.set_worker_id(entry->id);
    response.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
    response.set_coordinator_incarnation(incarnation_);
    LogInfo("coordinator: worker ", entry->id, " registered from ", entry->address);
    workers_[entry->id] = std::move(entry);
  }
  for (auto& s : to_release) ReleaseSession(s);
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(const v1::HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  v1::HeartbeatResponse response;
  auto it = workers_.find(request.worker_id());
  if (it == workers_.end() || it->second->incarnation != request.incarnation()) {
    response.set_reregister(true);
  } else {
    WorkerEntry& w = *it->second;
    const absl::Time now = absl::Now();
    // A gap of k intervals means k - 1 heartbeats did not come (the reaper counts the misses of a
    // worker it drops).
    metrics_.HeartbeatsMissed(MissedIntervals(now - w.last_heartbeat));
    w.last_heartbeat = now;
    w.draining = request.draining();
    w.activity.reset();
    for (const v1::WorkerActivity& a : request.activities()) {
      if (!w.session.empty() && a.session() == w.session) w.activity = a;
    }
  }
  return response;
}

absl::Status Coordinator::DeregisterWorker(const v1::DeregisterWorkerRequest& request) {
  std::shared_ptr<Session> to_release;
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(request.worker_id());
    if (it == workers_.end() || it->second->incarnation != request.incarnation()) {
      return absl::NotFoundError(absl::StrCat("no live worker ", request.worker_id(),
                                              " with incarnation ", request.incarnation()));
    }
    const std::string session = it->second->session;
    DropWorkerLocked(request.worker_id(),
                     absl::StrCat("left the cluster: ",
                                  request.reason().empty() ? "deregistered" : request.reason()));
    auto s = sessions_.find(session);
    if (s != sessions_.end()) to_release = s->second;
  }
  if (to_release != nullptr) ReleaseSession(to_release);
  return absl::OkStatus();
}

v1::ListWorkersResponse Coordinator::ListWorkers(const Caller& caller) {
  absl::MutexLock lock(&mu_);
  auto visible = [&](const std::string& id) {
    if (id.empty() || caller.may_access_any_session()) return true;
    auto it = sessions_.find(id);
    return it != sessions_.end() && it->second->owner.name == caller.name;
  };
  v1::ListWorkersResponse response;
  const absl::Time now = absl::Now();
  for (const auto& [id, w] : workers_) {
    v1::WorkerInfo* info = response.add_workers();
    info->set_worker_id(id);
    info->set_address(w->address);
    info->set_gloo_address(w->gloo_address);
    info->set_incarnation(w->incarnation);
    info->set_rank(w->rank);
    info->set_last_heartbeat_ms_ago(absl::ToInt64Milliseconds(now - w->last_heartbeat));
    info->set_session(visible(w->session) ? w->session : "(another client's)");
    for (int64_t c : w->coordinate) info->add_coordinate(c);
    if (w->activity.has_value() && visible(w->session)) *info->mutable_activity() = *w->activity;
  }
  for (const auto& [id, s] : sessions_) {
    if (!visible(id)) continue;
    response.add_sessions(id);
    v1::SessionInfo* info = response.add_session_infos();
    info->set_session(id);
    info->set_owner(s->owner.name);
    info->set_mesh(s->mesh.ToString());
    info->set_layout(s->layout);
    info->set_state(s->expired ? "expired" : s->failed.ok() ? "ready" : "failed");
    info->set_step(s->step.load());
    info->set_age_ms(absl::ToInt64Milliseconds(now - s->created));
    info->set_last_error(std::string(s->failed.message()));
    const bool leased = options_.session_lease > absl::ZeroDuration() && !s->expired;
    info->set_lease_renewed_ms_ago(leased ? absl::ToInt64Milliseconds(now - s->lease_renewed) : -1);
  }
  for (const auto& [id, what] : waiting_) response.add_waiting(what);
  return response;
}

std::string Coordinator::DescribeMissingLocked(int n) const {
  std::map<int, const WorkerEntry*> by_rank;
  int unranked_free = 0;
  for (const auto& [id, w] : workers_) {
    if (w->rank >= 0) {
      by_rank[w->rank] = w.get();
    } else if (w->session.empty()) {
      ++unranked_free;
    }
  }
  std::vector<std::string> missing;
  for (int r = 0; r < n; ++r) {
    auto it = by_rank.find(r);
    if (it == by_rank.end()) {
      missing.push_back(absl::StrCat("rank ", r, " not registered"));
    } else if (!it->second->session.empty()) {
      missing.push_back(absl::StrCat("rank ", r, " (worker ", it->second->id, ", ",
                                     it->second->address, ") busy in another session"));
    }
  }
  if (missing.empty()) return "";
  return absl::StrCat(
      absl::StrJoin(missing, "; "),
      unranked_free > 0 ? absl::StrCat("; ", unranked_free, " free worker(s) without a rank") : "");
}

std::string Coordinator::DescribeWorkersLocked() const {
  std::vector<std::string> parts;
  for (const auto& [id, w] : workers_) {
    parts.push_back(absl::StrCat("worker ", id, " (", w->address,
                                 w->rank >= 0 ? absl::StrCat(", rank ", w->rank) : "", ") ",
                                 w->session.empty() ? "free" : "busy in a session"));
  }
  return parts.empty() ? "no workers are registered" : absl::StrJoin(parts, "; ");
}

absl::Status Coordinator::CheckAutoLayoutRequest(const v1::CreateSessionRequest& request) {
  if (request.auto_mesh_processors() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateSession's auto_mesh_processors is ", request.auto_mesh_processors(),
                     "; give a processor count >= 1, or 0 with a mesh"));
  }
  if (request.auto_mesh_processors() > 0) {
    if (!request.auto_layout()) {
      return absl::InvalidArgumentError(
          "CreateSession's auto_mesh_processors lets the planner choose the mesh, so it must "
          "choose the rules too: set auto_layout (rules name mesh dims, which depend on the mesh)");
    }
    if (request.mesh().dims_size() > 0) {
      return absl::InvalidArgumentError(
          "CreateSession has both a mesh and auto_mesh_processors; give one of them");
    }
    return absl::OkStatus();
  }
  if (request.mesh().dims_size() == 0) {
    return absl::InvalidArgumentError(
        "CreateSession needs a mesh with at least one dim, e.g. rows:2 (the request's mesh is "
        "empty), or auto_layout with auto_mesh_processors");
  }
  if (request.auto_layout() && request.rules().rules_size() > 0) {
    return absl::InvalidArgumentError(
        "CreateSession has both layout rules and auto_layout; give one of them");
  }
  return absl::OkStatus();
}

HardwareProfile Coordinator::PlannerProfile() {
  absl::MutexLock lock(&profile_mu_);
  if (!options_.profile_path.empty()) {
    absl::StatusOr<HardwareProfile> fresh = LoadHardwareProfile(options_.profile_path);
    if (fresh.ok()) {
      profile_ = *std::move(fresh);
    } else {
      LogWarning("coordinator: keeping the planner's last profile (", profile_.source,
                 "): ", fresh.status().message());
    }
  }
  return profile_;
}

std::vector<Coordinator::WorkerEntry*> Coordinator::FreeWorkersInRankOrderLocked() {
  std::vector<WorkerEntry*> free;
  for (auto& [id, w] : workers_) {
    if (w->session.empty()) free.push_back(w.get());
  }
  // Ranked workers first, in rank order (stable processor numbers across restarts).
  std::stable_sort(free.begin(), free.end(), [](const WorkerEntry* a, const WorkerEntry* b) {
    return (a->rank < 0 ? INT32_MAX : a->rank) < (b->rank < 0 ? INT32_MAX : b->rank);
  });
  return free;
}

absl::StatusOr<Plan> Coordinator::PlanSession(const Graph& graph,
                                              const v1::CreateSessionRequest& request) {
  std::vector<Mesh> meshes;
  if (request.auto_mesh_processors() > 0) {
    ASSIGN_OR_RETURN(meshes, MeshesFor(request.auto_mesh_processors()));
  } else {
    ASSIGN_OR_RETURN(Mesh mesh, Mesh::FromProto(request.mesh()));
    meshes.push_back(std::move(mesh));
  }
  PlanOptions plan;
  plan.profile = PlannerProfile();
  // The smallest limit that will be checked: the flag's, the request's, and with auto the least
  // available memory a registered worker reported.
  auto tighten = [&plan](int64_t limit) {
    if (limit > 0 && (plan.memory_limit_bytes == 0 || limit < plan.memory_limit_bytes)) {
      plan.memory_limit_bytes = limit;
    }
  };
  tighten(options_.memory_limit);
  tighten(request.memory_limit_bytes());
  {
    absl::MutexLock lock(&mu_);
    if (options_.memory_limit == kMemoryLimitAuto) {
      for (const auto& [id, w] : workers_) tighten(w->available_memory_bytes);
    }
    // The hosts of the workers the session would take now (processor p = the p-th free worker):
    // groups spanning hosts are costed with the profile's cross-host links. Too few free workers
    // yet: the hosts are unknown, every group is costed as same-host.
    const std::vector<WorkerEntry*> free = FreeWorkersInRankOrderLocked();
    const int n = meshes.empty() ? 0 : meshes.front().num_processors();
    if (static_cast<int>(free.size()) >= n) {
      for (int p = 0; p < n; ++p) plan.profile.processor_hosts.push_back(HostOf(free[p]->address));
    }
  }
  absl::StatusOr<Plan> chosen = PlanLayout(graph, meshes, plan);
  if (!chosen.ok()) {
    return absl::Status(chosen.status().code(),
                        absl::StrCat("auto_layout: ", chosen.status().message()));
  }
  return chosen;
}

absl::StatusOr<v1::CreateSessionResponse> Coordinator::CreateSession(
    const v1::CreateSessionRequest& request, const Caller& caller) {
  if (request.graph().ops_size() == 0) {
    return absl::InvalidArgumentError(
        "CreateSession needs a graph with at least one op (the request's graph is empty)");
  }
  RETURN_IF_ERROR(CheckAutoLayoutRequest(request));
  // Caps first, before anything in proportion to the request is allocated; none of this takes mu_.
  const RequestLimits& limits = options_.limits;
  RETURN_IF_ERROR(CheckGraphBytes(static_cast<int64_t>(request.ByteSizeLong()), limits,
                                  "the CreateSession request"));
  if (request.auto_mesh_processors() > 0) {
    v1::Mesh flat;  // the planner's meshes have this many processors
    v1::Dim* d = flat.add_dims();
    d->set_name("x");
    d->set_size(request.auto_mesh_processors());
    RETURN_IF_ERROR(CheckMeshLimits(flat, limits));
  } else {
    RETURN_IF_ERROR(CheckMeshLimits(request.mesh(), limits));
  }
  auto session = std::make_shared<Session>();
  session->owner = caller;
  {
    ASSIGN_OR_RETURN(std::string token, RandomToken());
    session->id = absl::StrCat("s-", token.substr(0, 32));
  }
  ScopedLogContext log_session(session->id);
  ASSIGN_OR_RETURN(session->graph, Graph::Build(request.graph(), limits));
  v1::TrainingOutputs training;
  if (request.has_training()) {
    // The gradients and updates the request asks for; the caps hold for the graph that runs.
    ASSIGN_OR_RETURN(TrainedGraph trained,
                     AddTraining(session->graph, request.training(), &limits));
    session->graph = std::move(trained.graph);
    training = std::move(trained.outputs);
  }
  LayoutRules rules;
  std::string plan_text;
  if (request.auto_layout()) {
    ASSIGN_OR_RETURN(const Plan plan, PlanSession(session->graph, request));
    session->mesh = plan.best[0].mesh;
    rules = plan.best[0].rules;
    plan_text = ExplainPlan(plan);
    session->planned_step_seconds = plan.best[0].seconds;
    LogInfo("coordinator: planned ", plan_text);
  } else {
    ASSIGN_OR_RETURN(session->mesh, Mesh::FromProto(request.mesh()));
    ASSIGN_OR_RETURN(rules, LayoutRules::FromProto(request.rules(), session->mesh));
  }
  session->layout = rules.ToString();
  RETURN_IF_ERROR(CheckRulesNameGraphDims(session->graph, rules));  // a typo splits nothing
  ASSIGN_OR_RETURN(session->program, Lower(session->graph, session->mesh, rules));
  for (const v1::ProgramTensor& t : session->program.outputs()) session->outputs[t.name()] = t;
  session->plan_text = plan_text;
  session->loss_tensor = request.has_training() ? training.loss() : "";
  session->tokens_per_step = CoordinatorMetrics::TokensPerStep(session->graph);
  const Mesh& mesh = session->mesh;
  const int n = mesh.num_processors();
  // The memory limits known before any worker is picked: the flag's and the request's.
  ASSIGN_OR_RETURN(const MemoryReport memory, SessionMemory(session->graph, session->program));
  session->explain_text = absl::StrCat(ExplainProgram(session->program), ExplainMemory(memory));
  auto refuse = [&](int64_t limit, const std::string& whose) {
    return MemoryRefusal(session->graph, mesh, rules, session->program, memory, limit, whose,
                         options_.memory_suggestion_lowerings);
  };
  if (options_.memory_limit > 0 && memory.peak_bytes > options_.memory_limit &&
      (request.memory_limit_bytes() <= 0 ||
       options_.memory_limit <= request.memory_limit_bytes())) {
    return refuse(options_.memory_limit, "the coordinator's --memory_limit, on every worker");
  }
  if (request.memory_limit_bytes() > 0 && memory.peak_bytes > request.memory_limit_bytes()) {
    return refuse(request.memory_limit_bytes(),
                  "the request's memory_limit_bytes, on every worker");
  }
  // With --memory_limit=auto: the worker with the least available memory among those picked.
  int64_t short_limit = 0;
  std::string short_worker;

  const absl::Duration wait = request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms())
                                                       : options_.default_worker_wait;
  const absl::Time deadline = absl::Now() + wait;
  {
    absl::MutexLock lock(&mu_);
    const int wait_id = next_wait_++;
    struct WaitEntry {  // removes this call from waiting_ however it ends
      Coordinator* c;
      int id;
      ~WaitEntry() ABSL_NO_THREAD_SAFETY_ANALYSIS { c->waiting_.erase(id); }
    } wait_entry{this, wait_id};
    while (true) {
      std::vector<WorkerEntry*> free = FreeWorkersInRankOrderLocked();
      waiting_[wait_id] =
          absl::StrCat("a session on mesh ", mesh.ToString(), " waits for ", n, " free worker(s), ",
                       free.size(), " free of ", workers_.size(), " registered", [&] {
                         const std::string m = DescribeMissingLocked(n);
                         return m.empty() ? std::string() : absl::StrCat(": ", m);
                       }());
      if (static_cast<int>(free.size()) >= n) {
        if (options_.memory_limit == kMemoryLimitAuto) {
          // Workers of the session on one host (same address up to the port) share its memory.
          std::map<std::string, int> per_host;
          for (int p = 0; p < n; ++p) ++per_host[HostOf(free[p]->address)];
          for (int p = 0; p < n; ++p) {
            const int sharing = per_host[HostOf(free[p]->address)];
            const int64_t available = free[p]->available_memory_bytes / sharing;
            if (available > 0 && memory.peak_bytes > available &&
                (short_limit == 0 || available < short_limit)) {
              short_limit = available;
              short_worker = absl::StrCat(
                  "worker ", free[p]->id, " (", free[p]->address,
                  ")'s available memory at registration",
                  sharing == 1 ? ""
                               : absl::StrCat(" (", HumanBytes(free[p]->available_memory_bytes),
                                              ") shared by the session's ", sharing,
                                              " workers on its host"));
            }
          }
          if (short_limit > 0) break;  // refused below, outside mu_: no worker is taken
        }
        for (int p = 0; p < n; ++p) {
          free[p]->session = session->id;
          free[p]->coordinate = mesh.Coordinate(p);
          session->worker_ids.push_back(free[p]->id);
          session->addresses.push_back(free[p]->address);
          session->clients.push_back(free[p]->client);
        }
        sessions_[session->id] = session;
        break;
      }
      if (absl::Now() >= deadline || stopping_) {
        const int registered = static_cast<int>(workers_.size());
        const std::string what =
            absl::StrCat("mesh ", mesh.ToString(), " needs ", n, " worker(s) but ", registered,
                         " are registered and ", free.size(), " are free (waited ",
                         absl::FormatDuration(wait), "): ", DescribeWorkersLocked(), [&] {
                           const std::string m = DescribeMissingLocked(n);
                           return m.empty() ? std::string() : absl::StrCat("; missing: ", m);
                         }());
        if (registered < n) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, "; start more workers or use a smaller mesh"));
        }
        return absl::UnavailableError(absl::StrCat(what, "; close a session or wait"));
      }
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(50));
    }
  }

  if (short_limit > 0) return refuse(short_limit, short_worker);

  // Session ids are random and never reused, so the id alone makes the rendezvous keys fresh.
  const std::string prefix = absl::StrCat("session/", session->id);
  absl::Status registered;
  {
    // Under mu_ with `released`: a session released meanwhile (a worker dropped) never registers a
    // prefix that nothing would delete. kv_ takes no lock of ours, and this is one map insert.
    absl::MutexLock lock(&mu_);
    if (!session->released) {
      session->kv_prefix = prefix;
      registered = kv_.RegisterPrefix(
          prefix,
          KeyValueQuota{SessionQuota(options_.kv_keys_per_processor, n, options_.kv.max_keys),
                        SessionQuota(options_.kv_bytes_per_processor, n, options_.kv.max_bytes)});
      if (!registered.ok()) {
        session->kv_prefix.clear();
        FailSessionLocked(session.get(), registered);
        sessions_.erase(session->id);
      }
    }
  }
  if (!registered.ok()) {
    ReleaseSession(session);
    return registered;
  }
  // The first worker to fail names the cause: it ends the session's rendezvous at once, so the
  // others (waiting in it for the failed one) fail now too instead of at their timeout.
  std::vector<absl::Status> loaded(n);
  std::vector<int> failed_order;  // processors in the order their loads failed
  absl::Mutex failed_mu;
  ParallelFor(n, [&](int p) {
    v1::SessionSpec spec;
    spec.set_session(session->id);
    *spec.mutable_program() = session->program;
    for (int64_t c : mesh.Coordinate(p)) spec.add_coordinate(c);
    spec.set_kv_prefix(prefix);
    spec.set_collective_timeout_ms(absl::ToInt64Milliseconds(options_.collective_timeout));
    loaded[p] =
        session->clients[p]->LoadSession(spec, options_.collective_timeout + absl::Seconds(10));
    if (loaded[p].ok()) return;
    bool first = false;
    {
      absl::MutexLock lock(&failed_mu);
      first = failed_order.empty();
      failed_order.push_back(p);
    }
    if (first) kv_.DeletePrefix(prefix);
  });
  if (!failed_order.empty()) {
    auto where = [&](int p) {
      return absl::StrCat("worker ", session->worker_ids[p], " (", session->addresses[p],
                          ", mesh coordinate ", CoordString(mesh.Coordinate(p)), ")");
    };
    const int p = failed_order[0];
    std::vector<std::string> after;
    for (size_t k = 1; k < failed_order.size(); ++k) {
      const int q = failed_order[k];
      after.push_back(absl::StrCat(where(q), ": ", Abbreviated(loaded[q].message(), 300)));
    }
    absl::Status error(
        loaded[p].code(),
        absl::StrCat(
            "loading session ", session->id, after.empty() ? " failed on " : " failed first on ",
            where(p), ": ", loaded[p].message(),
            after.empty()
                ? ""
                : absl::StrCat("; then ", after.size(),
                               " other worker(s) failed after it: ", absl::StrJoin(after, "; "))));
    {
      absl::MutexLock lock(&mu_);
      FailSessionLocked(session.get(), error);
      sessions_.erase(session->id);
      if (IsTransportFailure(loaded[p])) DropWorkerLocked(session->worker_ids[p], "is unreachable");
    }
    ReleaseSession(session);
    LogError("coordinator: ", error.message());
    errors_.Add(session->id, std::string(error.message()));
    return error;
  }

  {
    // From now on its client knows the id and renews the lease.
    absl::MutexLock lock(&mu_);
    session->creating = false;
    session->lease_renewed = absl::Now();
  }
  v1::CreateSessionResponse response;
  response.set_session(session->id);
  response.set_lease_ms(absl::ToInt64Milliseconds(options_.session_lease));
  response.set_explain(session->explain_text);
  *response.mutable_mesh() = mesh.ToProto();
  *response.mutable_rules() = rules.ToProto();
  response.set_plan(plan_text);
  if (request.has_training()) *response.mutable_training() = training;
  for (int p = 0; p < n; ++p) {
    v1::WorkerInfo* info = response.add_workers();
    info->set_worker_id(session->worker_ids[p]);
    info->set_address(session->addresses[p]);
    info->set_session(session->id);
    for (int64_t c : mesh.Coordinate(p)) info->add_coordinate(c);
  }
  LogInfo("coordinator: session ", session->id, " on mesh ", mesh.ToString(), " with layout '",
          rules.ToString(), "'");
  return response;
}

absl::Status Coordinator::CloseSession(const std::string& id) {
  std::shared_ptr<Session> session;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
    session = it->second;
    sessions_.erase(it);
  }
  ReleaseSession(session);  // a no-op for an expired session: it was released when it expired
  metrics_.SessionEnded(id);
  LogInfo("coordinator: session ", id, " closed");
  return absl::OkStatus();
}

absl::Status Coordinator::CheckSessionAccess(const std::string& id, const Caller& caller) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
  if (caller.may_access_any_session() || it->second->owner.name == caller.name) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("session '", id,
                   "' belongs to another client; only the client that created it (or an "
                   "operator, --operator_token_file) may use it"));
}

absl::StatusOr<std::shared_ptr<Coordinator::Session>> Coordinator::FindSession(
    const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
  if (!it->second->expired) it->second->lease_renewed = absl::Now();
  return it->second;
}

absl::Status Coordinator::CheckUsable(Session* session) {
  absl::MutexLock lock(&mu_);
  if (session->expired) return session->failed;  // FailedPrecondition, saying why
  if (!session->failed.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", session->id, " has failed and must be closed: ", session->failed.message()));
  }
  return absl::OkStatus();
}

}  // namespace meshrt
