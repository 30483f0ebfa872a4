// CreateSession and its steps, in the order they run (coordinator.h lists them):
//   CheckSessionRequest  the request's fields and caps, before anything in proportion to it
//   BuildSession         the graph (with training), the mesh and rules (or the planner's), the
//                        program and its memory report; no lock of the coordinator is taken
//   CheckMemoryLimits    the flag's and the request's memory limits, before any worker is picked
//   TakeWorkers          waits for enough free workers (and, with --memory_limit=auto, checks
//                        their memory); the session is listed once it has them
//   RegisterRendezvous   the session's key-value prefix and quota (runtime/kv_store.h)
//   LoadOnWorkers        every worker loads its processor's program; the first failure is named
//                        first, the others after it
//   SessionResponse      what the client gets back
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_internal.h"
#include "coordinator/memory_limit.h"
#include "core/ir/limits.h"
#include "core/lowering/lowering.h"
#include "core/ops/graph.h"
#include "core/ops/layout_names.h"
#include "core/planning/explain.h"
#include "core/planning/layout_search.h"
#include "core/planning/memory_model.h"
#include "core/train/training_spec.h"
#include "rpc/auth.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

using coordinator_internal::CoordString;
using coordinator_internal::IsTransportFailure;
using coordinator_internal::ParallelFor;

namespace {

// per_processor * n, or `cap` when that is smaller (and without overflowing).
int64_t SessionQuota(int64_t per_processor, int n, int64_t cap) {
  return per_processor > cap / n ? cap : per_processor * n;
}

}  // namespace

// A session being made: the session itself (not yet listed) and what its response and memory
// refusals need besides.
struct Coordinator::SessionBuild {
  std::shared_ptr<Session> session;
  LayoutRules rules;
  v1::TrainingOutputs training;  // the request's gradients and updates (with training only)
  MemoryReport memory;           // the program's bytes per worker (core/planning/memory_model.h)
};

absl::StatusOr<v1::CreateSessionResponse> Coordinator::CreateSession(
    const v1::CreateSessionRequest& request, const Caller& caller) {
  RETURN_IF_ERROR(CheckSessionRequest(request));
  auto session = std::make_shared<Session>();
  session->owner = caller;
  {
    ASSIGN_OR_RETURN(std::string token, RandomToken());
    session->id = absl::StrCat("s-", token.substr(0, 32));
  }
  ScopedLogContext log_session(session->id);
  ASSIGN_OR_RETURN(const SessionBuild build, BuildSession(request, std::move(session)));
  RETURN_IF_ERROR(CheckMemoryLimits(build, request));
  const absl::Duration wait = request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms())
                                                       : options_.default_worker_wait;
  RETURN_IF_ERROR(TakeWorkers(build, wait));
  RETURN_IF_ERROR(RegisterRendezvous(build.session));
  RETURN_IF_ERROR(LoadOnWorkers(build.session));
  {
    // From now on its client knows the id and renews the lease.
    absl::MutexLock lock(&mu_);
    build.session->creating = false;
    build.session->lease_renewed = absl::Now();
  }
  LogInfo("coordinator: session ", build.session->id, " on mesh ", build.session->mesh.ToString(),
          " with layout '", build.session->layout, "'");
  return SessionResponse(build, request);
}

absl::Status Coordinator::CheckSessionRequest(const v1::CreateSessionRequest& request) const {
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
    return CheckMeshLimits(flat, limits);
  }
  return CheckMeshLimits(request.mesh(), limits);
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

absl::StatusOr<Coordinator::SessionBuild> Coordinator::BuildSession(
    const v1::CreateSessionRequest& request, std::shared_ptr<Session> session) {
  const RequestLimits& limits = options_.limits;
  SessionBuild build;
  ASSIGN_OR_RETURN(session->graph, Graph::Build(request.graph(), limits));
  if (request.has_training()) {
    // The gradients and updates the request asks for; the caps hold for the graph that runs.
    ASSIGN_OR_RETURN(TrainedGraph trained,
                     AddTraining(session->graph, request.training(), &limits));
    session->graph = std::move(trained.graph);
    build.training = std::move(trained.outputs);
  }
  if (request.auto_layout()) {
    ASSIGN_OR_RETURN(const Plan plan, PlanSession(session->graph, request));
    session->mesh = plan.best[0].mesh;
    build.rules = plan.best[0].rules;
    session->plan_text = ExplainPlan(plan);
    session->planned_step_seconds = plan.best[0].seconds;
    LogInfo("coordinator: planned ", session->plan_text);
  } else {
    ASSIGN_OR_RETURN(session->mesh, Mesh::FromProto(request.mesh()));
    ASSIGN_OR_RETURN(build.rules, LayoutRules::FromProto(request.rules(), session->mesh));
  }
  session->layout = build.rules.ToString();
  RETURN_IF_ERROR(CheckRulesNameGraphDims(session->graph, build.rules));  // a typo splits nothing
  ASSIGN_OR_RETURN(session->program, Lower(session->graph, session->mesh, build.rules));
  for (const v1::ProgramTensor& t : session->program.outputs()) session->outputs[t.name()] = t;
  session->loss_tensor = request.has_training() ? build.training.loss() : "";
  session->tokens_per_step = CoordinatorMetrics::TokensPerStep(session->graph);
  ASSIGN_OR_RETURN(build.memory, SessionMemory(session->graph, session->program));
  session->explain_text =
      absl::StrCat(ExplainProgram(session->program), ExplainMemory(build.memory));
  build.session = std::move(session);
  return build;
}

absl::Status Coordinator::RefuseMemory(const SessionBuild& build, int64_t limit,
                                       const std::string& whose) const {
  const Session& s = *build.session;
  return MemoryRefusal(s.graph, s.mesh, build.rules, s.program, build.memory, limit, whose,
                       options_.memory_suggestion_lowerings);
}

absl::Status Coordinator::CheckMemoryLimits(const SessionBuild& build,
                                            const v1::CreateSessionRequest& request) const {
  const int64_t peak = build.memory.peak_bytes;
  if (options_.memory_limit > 0 && peak > options_.memory_limit &&
      (request.memory_limit_bytes() <= 0 ||
       options_.memory_limit <= request.memory_limit_bytes())) {
    return RefuseMemory(build, options_.memory_limit,
                        "the coordinator's --memory_limit, on every worker");
  }
  if (request.memory_limit_bytes() > 0 && peak > request.memory_limit_bytes()) {
    return RefuseMemory(build, request.memory_limit_bytes(),
                        "the request's memory_limit_bytes, on every worker");
  }
  return absl::OkStatus();
}

absl::Status Coordinator::TakeWorkers(const SessionBuild& build, absl::Duration wait) {
  Session* session = build.session.get();
  const Mesh& mesh = session->mesh;
  const int n = mesh.num_processors();
  // With --memory_limit=auto: the worker with the least available memory among those picked.
  int64_t short_limit = 0;
  std::string short_worker;
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
            if (available > 0 && build.memory.peak_bytes > available &&
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
        sessions_[session->id] = build.session;
        break;
      }
      if (absl::Now() >= deadline || stopping_) {
        const int registered = static_cast<int>(workers_.size());
        const std::string what =
            absl::StrCat("mesh ", mesh.ToString(), " needs ", n, " worker(s) but ", registered,
                         " are registered and ", free.size(), " are free (waited ",
                         absl::FormatDuration(wait),
                         " for workers to register or be freed: the request's timeout_ms, "
                         "Python's wait=): ",
                         DescribeWorkersLocked(), [&] {
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
  if (short_limit > 0) return RefuseMemory(build, short_limit, short_worker);
  return absl::OkStatus();
}

absl::Status Coordinator::RegisterRendezvous(const std::shared_ptr<Session>& session) {
  // Session ids are random and never reused, so the id alone makes the rendezvous keys fresh.
  const std::string prefix = absl::StrCat("session/", session->id);
  const int n = session->mesh.num_processors();
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
  if (!registered.ok()) ReleaseSession(session);
  return registered;
}

absl::Status Coordinator::LoadOnWorkers(const std::shared_ptr<Session>& session) {
  const Mesh& mesh = session->mesh;
  const int n = mesh.num_processors();
  const std::string prefix = absl::StrCat("session/", session->id);
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
  if (failed_order.empty()) return absl::OkStatus();
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
    // Only a failure of the transport says a worker is gone; a worker's own error (marked,
    // rpc/error_origin.h), Unavailable or not, leaves it registered.
    for (const int q : failed_order) {
      if (IsTransportFailure(loaded[q])) DropWorkerLocked(session->worker_ids[q], "is unreachable");
    }
  }
  ReleaseSession(session);
  LogError("coordinator: ", error.message());
  errors_.Add(session->id, std::string(error.message()));
  return error;
}

v1::CreateSessionResponse Coordinator::SessionResponse(
    const SessionBuild& build, const v1::CreateSessionRequest& request) const {
  const Session& session = *build.session;
  v1::CreateSessionResponse response;
  response.set_session(session.id);
  response.set_lease_ms(absl::ToInt64Milliseconds(options_.session_lease));
  response.set_explain(session.explain_text);
  *response.mutable_mesh() = session.mesh.ToProto();
  *response.mutable_rules() = build.rules.ToProto();
  response.set_plan(session.plan_text);
  if (request.has_training()) *response.mutable_training() = build.training;
  for (int p = 0; p < session.mesh.num_processors(); ++p) {
    v1::WorkerInfo* info = response.add_workers();
    info->set_worker_id(session.worker_ids[p]);
    info->set_address(session.addresses[p]);
    info->set_session(session.id);
    for (int64_t c : session.mesh.Coordinate(p)) info->add_coordinate(c);
  }
  return response;
}

}  // namespace meshrt
