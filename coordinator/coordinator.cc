#include "coordinator/coordinator.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/coordinator_internal.h"
#include "coordinator/step_traces.h"
#include "core/ir/slicing.h"
#include "core/lowering/lowering.h"
#include "core/ops/graph.h"
#include "core/ops/layout_names.h"
#include "core/planning/explain.h"
#include "core/train/training_spec.h"
#include "rpc/auth.h"
#include "rpc/tensor_chunks.h"
#include "rpc/tensor_region.h"
#include "rpc/wire_buffers.h"
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_store.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

using coordinator_internal::CoordString;
using coordinator_internal::IsTransportFailure;
using coordinator_internal::ParallelFor;

namespace {

KeyValueStoreOptions CoordinatorKvOptions(KeyValueStoreOptions kv) {
  kv.require_prefix = true;
  return kv;
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
