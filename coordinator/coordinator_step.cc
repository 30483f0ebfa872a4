// Coordinator::RunStep and its steps: check the request, slice the feeds, fan out to the
// workers, rank their failures (causes before effects), assemble the fetched tensors.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_internal.h"
#include "coordinator/step_traces.h"
#include "core/ir/slicing.h"
#include "rpc/tensor_region.h"
#include "rpc/wire_buffers.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

using coordinator_internal::CoordString;
using coordinator_internal::IsTransportFailure;

// The workers' calls of one step in flight, counted as they return. Fields under `mu`.
struct Coordinator::StepCalls {
  explicit StepCalls(int n) : results(n, absl::UnknownError("not run")) {}
  absl::Mutex mu;
  int done = 0;
  int failures = 0;
  int lost = 0;  // failed in transport: the worker is gone
  std::vector<absl::Status> results;  // by processor
};

// A failed step's errors, causes first (RankFailuresLocked).
struct Coordinator::StepFailure {
  std::vector<std::string> errors;
  absl::Status first;  // the cause's status: its code is the step's
  bool failed = false;
  std::vector<std::pair<int, std::string>> dead;  // worker id, why: to drop
};

namespace {

// Each worker's feeds: regions of the whole feeds `fed`, sent from where they lie. Once the last
// frame referencing them is gone, their storage is recycled for the next step.
std::vector<FeedSlices> SliceFeeds(const v1::Program& program, const Mesh& mesh,
                                   const std::shared_ptr<const TensorMap>& fed) {
  std::vector<FeedSlices> slices(mesh.num_processors());
  for (int p = 0; p < mesh.num_processors(); ++p) {
    const std::vector<int64_t> coord = mesh.Coordinate(p);
    for (const v1::ProgramTensor& in : program.inputs()) {
      const Tensor& feed = fed->at(in.name());
      slices[p][in.name()] =
          FeedSlice{std::shared_ptr<const Tensor>(fed, &feed),
                    TensorRegion::OfProcessor(feed.dtype(), feed.shape(),
                                              TensorLayout::FromProto(in.layout()), mesh, coord)};
    }
  }
  return slices;
}

// Whether the processor at `coord` returns its slice of a tensor laid out as `layout`: it is at
// coordinate 0 along every mesh dim the tensor is not split over (one owner per distinct slice).
bool OwnsSlice(const TensorLayout& layout, const std::vector<int64_t>& coord) {
  for (int a = 0; a < static_cast<int>(coord.size()); ++a) {
    if (std::find(layout.mesh_axis.begin(), layout.mesh_axis.end(), a) ==
            layout.mesh_axis.end() &&
        coord[a] != 0) {
      return false;
    }
  }
  return true;
}

// Each worker's fetch targets: the slices it owns of the whole fetched tensors `*out`, written
// straight into their places.
std::vector<FetchTargets> PlaceFetches(const std::map<std::string, v1::ProgramTensor>& outputs,
                                       const Mesh& mesh, TensorMap* out) {
  std::vector<FetchTargets> targets(mesh.num_processors());
  for (int p = 0; p < mesh.num_processors(); ++p) {
    const std::vector<int64_t> coord = mesh.Coordinate(p);
    for (auto& [f, whole] : *out) {
      TensorLayout layout = TensorLayout::FromProto(outputs.at(f).layout());
      if (!OwnsSlice(layout, coord)) continue;
      targets[p][f] =
          FetchTarget{static_cast<char*>(TensorData(&whole)),
                      TensorRegion::OfProcessor(whole.dtype(), whole.shape(), layout, mesh, coord)};
    }
  }
  return targets;
}

// The names of a worker's fetch targets: what its StepRequest fetches.
std::vector<std::string> TargetNames(const FetchTargets& targets) {
  std::vector<std::string> names;
  for (const auto& [name, target] : targets) names.push_back(name);
  return names;
}

// Causes before effects: a worker that died (transport failure) first, then errors a worker
// raised itself, then peers' collective failures (Unavailable) that followed.
int FailureRank(const absl::Status& s) {
  if (IsTransportFailure(s)) return 0;
  return s.code() == absl::StatusCode::kUnavailable ? 2 : 1;
}

// The fetched loss, when `loss_tensor` names a fetched float scalar.
std::optional<float> FetchedLoss(const TensorMap& out, const std::string& loss_tensor) {
  auto l = out.find(loss_tensor);
  if (loss_tensor.empty() || l == out.end() || l->second.dtype() != DType::kFloat32 ||
      l->second.num_elements() != 1) {
    return std::nullopt;
  }
  return l->second.f32()[0];
}

}  // namespace

absl::StatusOr<TensorMap> Coordinator::RunStep(const std::string& id, TensorMap feeds,
                                               const std::vector<std::string>& fetches,
                                               int64_t num_steps, int64_t trace_first,
                                               int64_t trace_last,
                                               std::vector<v1::StepTrace>* traces) {
  StepRequest request;
  request.session = id;
  request.fetches = fetches;
  request.num_steps = num_steps;
  request.trace_first = trace_first;
  request.trace_last = trace_last;
  return RunStep(request, std::move(feeds), traces);
}

absl::StatusOr<TensorMap> Coordinator::RunStep(const StepRequest& asked, TensorMap feeds,
                                               std::vector<v1::StepTrace>* traces) {
  const std::string& id = asked.session;
  const std::vector<std::string>& requested = asked.fetches;
  const int64_t num_steps = asked.num_steps;
  ScopedLogContext log_session(id);
  const absl::Time started = absl::Now();
  ASSIGN_OR_RETURN(std::shared_ptr<Session> session, FindSession(id));
  absl::MutexLock step_lock(&session->step_mu);
  RETURN_IF_ERROR(CheckUsable(session.get()));
  StepRequest request;
  request.session = id;
  request.num_steps = num_steps;
  request.step_fetches = requested.empty() ? session->graph.Outputs() : requested;
  if (traces != nullptr) request.trace_first = asked.trace_first, request.trace_last = asked.trace_last;
  RETURN_IF_ERROR(CheckStepRequest(*session, feeds, request));
  const bool tracing = request.trace_first != 0 || request.trace_last != 0;
  // The whole fetched tensors, which the workers' slices fill in place.
  ASSIGN_OR_RETURN(TensorMap out, AllocateFetches(*session, request.step_fetches));
  request.num_steps = std::max<int64_t>(num_steps, 1);
  request.step = session->step + 1;
  session->step += request.num_steps;
  ScopedLogContext log_step(id, request.step);
  const int n = session->mesh.num_processors();

  const std::vector<FeedSlices> worker_feeds =
      SliceFeeds(session->program, session->mesh, ShareAndRecycle(std::move(feeds)));
  std::vector<FetchTargets> worker_fetches = PlaceFetches(session->outputs, session->mesh, &out);
  std::vector<std::vector<v1::StepTrace>> worker_traces(n);
  StepProgress progress(request.step, request.step + request.num_steps - 1, absl::Now());
  const std::vector<absl::Status> results =
      FanOut(session.get(), request, worker_feeds, &worker_fetches,
             tracing ? &worker_traces : nullptr, &progress);
  RETURN_IF_ERROR(FailStep(session, request.step, results));

  const absl::Time finished = absl::Now();
  progress.Finish(finished, &session->durations);
  metrics_.StepsDone(id, request.num_steps, finished - started, session->tokens_per_step);
  RETURN_IF_ERROR(CheckFetchesFilled(*session, worker_fetches));
  if (tracing) {
    for (v1::StepTrace& t : CompleteStepTraces(session->program, session->mesh,
                                               session->worker_ids, std::move(worker_traces))) {
      traces->push_back(std::move(t));
    }
  }
  // The dashboard's history: the step this request ended at and, when fetched, its loss.
  session->history.Record(request.step + request.num_steps - 1, finished,
                          FetchedLoss(out, session->loss_tensor));
  return out;
}

absl::Status Coordinator::CheckStepRequest(const Session& session, const TensorMap& feeds,
                                           const StepRequest& request) {
  for (const std::string& f : request.step_fetches) {
    if (!session.outputs.count(f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("fetch '", f, "' names no tensor of the graph"));
    }
  }
  RETURN_IF_ERROR(CheckFeeds(session.graph, feeds));
  const int64_t num_steps = request.num_steps;
  if (num_steps < 0 || num_steps > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_steps ", num_steps, " is out of range [0, 1000000]"));
  }
  const int64_t first = request.trace_first, last = request.trace_last;
  const bool tracing = first != 0 || last != 0;
  if (tracing && (first < 1 || last < first || last > std::max<int64_t>(num_steps, 1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace_first ", first, " and trace_last ", last,
                     " must satisfy 1 <= trace_first <= trace_last <= num_steps (",
                     std::max<int64_t>(num_steps, 1), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> Coordinator::AllocateFetches(const Session& session,
                                                       const std::vector<std::string>& fetches) {
  TensorMap out;
  for (const std::string& f : fetches) {
    if (out.count(f)) continue;
    const v1::ProgramTensor& t = session.outputs.at(f);
    ASSIGN_OR_RETURN(Shape shape, Shape::FromProto(t.shape()));
    ASSIGN_OR_RETURN(DType dtype, DTypeFromProto(t.dtype()));
    // Uninitialised: the owners' slices (one per distinct slice position) cover every element.
    out.emplace(f, NewTensorForWire(dtype, shape));
  }
  return out;
}

std::vector<absl::Status> Coordinator::FanOut(Session* session, const StepRequest& request,
                                              const std::vector<FeedSlices>& feeds,
                                              std::vector<FetchTargets>* fetches,
                                              std::vector<std::vector<v1::StepTrace>>* traces,
                                              StepProgress* progress) {
  auto cancel = std::make_shared<Cancellation>();
  {
    absl::MutexLock lock(&mu_);
    session->cancel = cancel;
    if (!session->failed.ok()) cancel->Cancel();
  }
  const int n = static_cast<int>(feeds.size());
  StepCalls calls(n);
  std::vector<std::thread> threads;
  for (int p = 0; p < n; ++p) {
    threads.emplace_back([&, p] {
      StepRequest mine = request;
      mine.fetches = TargetNames((*fetches)[p]);
      absl::Status r = session->clients[p]->RunStep(
          mine, feeds[p], &(*fetches)[p], options_.step_timeout * request.num_steps,
          cancel.get(), traces != nullptr ? &(*traces)[p] : nullptr);
      absl::MutexLock lock(&calls.mu);
      calls.failures += !r.ok();
      calls.lost += !r.ok() && IsTransportFailure(r);
      calls.results[p] = std::move(r);
      ++calls.done;
    });
  }
  WaitForWorkers(session, progress, &calls);
  cancel->Cancel();
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&calls.mu);
  return calls.results;
}

void Coordinator::WaitForWorkers(Session* session, StepProgress* progress, StepCalls* calls) {
  // Meanwhile the watchdog follows the steps in the workers' heartbeats (CheckStuckStep).
  ComputeWatch compute(options_.stuck_step);
  absl::Status stuck;
  const int n = static_cast<int>(session->clients.size());
  auto all_done = [&] { return calls->done == n; };
  auto any_failed = [&] { return calls->done == n || calls->failures > 0; };
  while (true) {
    {
      absl::MutexLock lock(&calls->mu);
      if (calls->mu.AwaitWithTimeout(absl::Condition(&any_failed), absl::Milliseconds(100))) break;
    }
    stuck = CheckStuckStep(session, progress, &compute);
    if (!stuck.ok()) {
      absl::MutexLock lock(&mu_);
      FailSessionLocked(session, stuck);  // cancels the step on every worker
      break;
    }
  }
  // On the first failure the others get a grace period to report on their own before the rest
  // are cancelled: when a worker dies its peers' collectives often fail before the dead worker's
  // own RPC does, and the error should name the dead worker, the cause, not only the effects.
  // Once the cause itself is known (a worker's transport failed: it is gone), the peers get a
  // much shorter grace: those that talk to it report at once, and the others would only wait in
  // collectives with peers that are stopping (failure_grace_after_cause).
  absl::MutexLock lock(&calls->mu);
  if (stuck.ok() && !all_done()) {
    auto cause_known = [&] { return calls->done == n || calls->lost > 0; };
    if (calls->mu.AwaitWithTimeout(absl::Condition(&cause_known), options_.failure_grace) &&
        !all_done()) {
      calls->mu.AwaitWithTimeout(absl::Condition(&all_done), options_.failure_grace_after_cause);
    }
  }
}

absl::Status Coordinator::FailStep(const std::shared_ptr<Session>& session, int64_t step,
                                   const std::vector<absl::Status>& results) {
  bool failed = false;
  bool expired = false;
  {
    absl::MutexLock lock(&mu_);
    session->cancel = nullptr;
    StepFailure failure = RankFailuresLocked(*session, results);
    failed = failure.failed;
    if (session->expired) {
      // The lease ran out under the step (ExpireLeasesLocked cancelled it and logged why): the
      // expiry is the reason, not the cancellations and aborts it caused on the workers.
      failed = expired = true;
    } else if (failed) {
      session->failed = absl::Status(
          failure.first.code(), absl::StrCat("step ", step, " of session ", session->id,
                                             " failed: ", absl::StrJoin(failure.errors, "; ")));
      for (const auto& [w, why] : failure.dead) DropWorkerLocked(w, why);
    }
  }
  if (!failed) return absl::OkStatus();
  metrics_.StepFailed();
  if (!expired) {
    LogError("coordinator: ", session->failed.message());
    errors_.Add(session->id, std::string(session->failed.message()));
  }
  ReleaseSession(session);
  absl::MutexLock lock(&mu_);
  return session->failed;
}

Coordinator::StepFailure Coordinator::RankFailuresLocked(const Session& session,
                                                         const std::vector<absl::Status>& results) {
  StepFailure f;
  // Failed from outside while the step ran (the watchdog's diagnosis, a worker that stopped
  // heartbeating or left): that is the cause; the workers' errors follow.
  if (!session.failed.ok()) {
    f.errors.push_back(std::string(session.failed.message()));
    f.first = session.failed;
    f.failed = true;
  }
  for (int pass = 0; pass < 3; ++pass) {
    for (int p = 0; p < static_cast<int>(results.size()); ++p) {
      const absl::Status& s = results[p];
      if (s.ok() || s.code() == absl::StatusCode::kCancelled || FailureRank(s) != pass) continue;
      std::string who =
          absl::StrCat("worker ", session.worker_ids[p], " (", session.addresses[p],
                       ", mesh coordinate ", CoordString(session.mesh.Coordinate(p)), ")");
      auto w = workers_.find(session.worker_ids[p]);
      // Dropped meanwhile (e.g. its heartbeats stopped): session.failed says why already.
      if (pass == 0 && w == workers_.end() && !session.failed.ok()) continue;
      if (pass == 0) {
        std::optional<absl::Duration> age;
        if (w != workers_.end()) age = absl::Now() - w->second->last_heartbeat;
        const std::string why = DescribeLostWorker(s, age, StaleHeartbeat());
        f.errors.push_back(absl::StrCat(who, " ", why));
        f.dead.emplace_back(session.worker_ids[p], why);
      } else {
        f.errors.push_back(absl::StrCat(who, ": ", s.message()));
      }
      if (!f.failed) f.first = s;
      f.failed = true;
    }
  }
  return f;
}

absl::Status Coordinator::CheckFetchesFilled(const Session& session,
                                             const std::vector<FetchTargets>& fetches) {
  for (int p = 0; p < static_cast<int>(fetches.size()); ++p) {
    for (const auto& [f, target] : fetches[p]) {
      if (!target.filled) {
        return absl::InternalError(absl::StrCat("worker ", session.worker_ids[p],
                                                " did not return its slice of '", f, "'"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace meshrt
