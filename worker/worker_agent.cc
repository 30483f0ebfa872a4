#include "worker/worker_agent.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "util/logging.h"

namespace meshrt {
namespace {

// The coordinator refused this worker's credential (rather than being unreachable).
bool IsCredentialRefusal(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnauthenticated ||
         s.code() == absl::StatusCode::kPermissionDenied;
}

}  // namespace

WorkerAgent::WorkerAgent(WorkerAgentOptions options, CoordinatorClient* coordinator,
                         Worker* worker, WorkerAgentHooks hooks)
    : options_(std::move(options)),
      coordinator_(coordinator),
      worker_(worker),
      hooks_(std::move(hooks)) {}

WorkerAgent::~WorkerAgent() { Stop(); }

int WorkerAgent::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

absl::Duration WorkerAgent::heartbeat_interval() const {
  absl::MutexLock lock(&mu_);
  return interval_;
}

bool WorkerAgent::Stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_ || (hooks_.interrupt != nullptr && hooks_.interrupt->load());
}

bool WorkerAgent::SleepUnlessStopped(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

absl::Status WorkerAgent::Start() {
  absl::StatusOr<v1::RegisterWorkerResponse> registered = RegisterWithRetry();
  if (!registered.ok()) return registered.status();
  {
    absl::MutexLock lock(&mu_);
    worker_id_ = registered->worker_id();
    coordinator_incarnation_ = registered->coordinator_incarnation();
    interval_ = std::max(absl::Milliseconds(registered->heartbeat_interval_ms()),
                         options_.min_heartbeat_interval);
  }
  if (hooks_.set_ready) hooks_.set_ready(true);
  heartbeats_ = std::thread([this] { HeartbeatLoop(); });
  return absl::OkStatus();
}

// Any start order works: retry the coordinator with backoff until it answers.
absl::StatusOr<v1::RegisterWorkerResponse> WorkerAgent::RegisterWithRetry() {
  const absl::Time deadline = absl::Now() + options_.register_timeout;
  absl::Duration backoff = options_.initial_backoff;
  while (true) {
    if (hooks_.cluster_token) {
      if (absl::StatusOr<std::string> token = hooks_.cluster_token(); token.ok()) {
        coordinator_->set_token(*token);
      }
    }
    auto r = coordinator_->Register(options_.registration, options_.register_call_timeout);
    if (r.ok() || Stopping() || absl::Now() > deadline) return r;
    LogWarning("meshrt-worker: coordinator ", options_.coordinator,
               IsCredentialRefusal(r.status()) ? " refused this worker's credential ("
                                               : " not reachable yet (",
               r.status().message(), "); retrying in ", absl::FormatDuration(backoff));
    if (!SleepUnlessStopped(backoff)) return r;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

// After registering again, drop the sessions held from before (`held`): a restarted coordinator
// (another incarnation) will never run or close its predecessor's, and the same coordinator
// asks a worker to register again only after dropping it (e.g. it stopped responding), which
// failed the session it served. Sessions loaded after the registration are kept.
void WorkerAgent::Adopt(const v1::RegisterWorkerResponse& r,
                        const std::vector<std::string>& held) {
  std::string before;
  {
    absl::MutexLock lock(&mu_);
    worker_id_ = r.worker_id();
    before = coordinator_incarnation_;
    coordinator_incarnation_ = r.coordinator_incarnation();
  }
  const bool restarted = r.coordinator_incarnation() != before;
  for (const std::string& id : held) {
    if (restarted) {
      LogWarning("meshrt-worker: dropped session ", id, " of an earlier coordinator incarnation (",
                 before, "; now ", r.coordinator_incarnation(), ")");
    } else {
      LogWarning("meshrt-worker: dropped session ", id,
                 ": the coordinator had dropped this worker (and failed the session)");
    }
    worker_->CloseSession(id).IgnoreError();
  }
}

v1::HeartbeatRequest WorkerAgent::MakeHeartbeat(bool draining) const {
  v1::HeartbeatRequest hb;
  hb.set_worker_id(worker_id());
  hb.set_incarnation(options_.registration.incarnation());
  hb.set_draining(draining);
  for (v1::WorkerActivity& a : worker_->Activities()) *hb.add_activities() = std::move(a);
  return hb;
}

void WorkerAgent::HeartbeatLoop() {
  do {
    const absl::Time next = absl::Now() + heartbeat_interval();
    HeartbeatOnce();
    if (!SleepUnlessStopped(next - absl::Now())) return;
  } while (true);
}

void WorkerAgent::HeartbeatOnce() {
  auto r = coordinator_->Heartbeat(MakeHeartbeat(false), heartbeat_interval() * 2);
  // Register again when the coordinator no longer knows us (it restarted) or no longer takes
  // our token (it restarted with a new cluster token: RegisterWithRetry reads it afresh).
  const bool refused = !r.ok() && IsCredentialRefusal(r.status());
  if (refused) {
    LogWarning("meshrt-worker: heartbeat refused (", r.status().message(),
               "); registering again with the current cluster token");
  } else if (!r.ok()) {
    LogWarning("meshrt-worker: heartbeat failed: ", r.status().message());
  }
  if (!refused && !(r.ok() && r->reregister())) return;
  const std::vector<std::string> held = worker_->Sessions();
  auto again = RegisterWithRetry();
  if (!again.ok()) return;
  Adopt(*again, held);
  LogInfo("meshrt-worker: re-registered as worker ", again->worker_id());
}

void WorkerAgent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  absl::MutexLock lock(&join_mu_);
  if (heartbeats_.joinable()) heartbeats_.join();
}

std::string WorkerAgent::DeregisterReason(bool idle) const {
  if (idle) return "shutting down (SIGTERM)";
  return absl::StrCat(
      "shutting down (SIGTERM); its step in flight did not finish within --drain_timeout_s=",
      absl::ToInt64Seconds(options_.drain_timeout), " and was aborted");
}

// Graceful shutdown (SIGTERM, e.g. Kubernetes deleting the pod): not ready any more, no new
// sessions or steps, the calls in flight finish (or are left after drain_timeout), the
// coordinator is told at once (so the session that used this worker fails now, with the reason,
// rather than after missed heartbeats).
bool WorkerAgent::Drain() {
  Stop();
  LogInfo("meshrt-worker: stopping: draining for up to ",
          absl::ToInt64Seconds(options_.drain_timeout), " s");
  if (hooks_.set_ready) hooks_.set_ready(false);
  // One last heartbeat saying so: the coordinator shows this worker as draining meanwhile.
  coordinator_->Heartbeat(MakeHeartbeat(true), options_.last_heartbeat_timeout).IgnoreError();
  const bool idle = hooks_.drain_calls ? hooks_.drain_calls(options_.drain_timeout) : true;
  v1::DeregisterWorkerRequest leave;
  leave.set_worker_id(worker_id());
  leave.set_incarnation(options_.registration.incarnation());
  leave.set_reason(DeregisterReason(idle));
  absl::Status left = coordinator_->Deregister(leave, options_.deregister_timeout);
  if (!left.ok()) LogWarning("meshrt-worker: deregistering: ", left.message());
  LogInfo("meshrt-worker: ", idle ? "drained" : "aborting the step in flight",
          "; deregistered; exiting");
  return idle;
}

}  // namespace meshrt
