#include "coordinator/coordinator_metrics.h"

#include <algorithm>

#include "coordinator/coordinator_internal.h"
#include "core/ops/ops.h"

namespace meshrt {

CoordinatorMetrics::CoordinatorMetrics() {
  MetricsRegistry& r = registry_;
  step_duration_ = r.AddHistogram(
      "meshrt_step_duration_seconds",
      "Wall time of a session's step as the coordinator runs it (a RunStep of n repetitions "
      "counts n steps of its mean duration).",
      {"session"}, DurationBuckets());
  steps_ = r.AddCounter("meshrt_steps_total", "Steps a session ran to completion.", {"session"});
  tokens_ = r.AddCounter("meshrt_tokens_total",
                         "Training tokens (text_windows input elements) a session's steps read.",
                         {"session"});
  step_failures_ = r.AddCounter("meshrt_step_failures_total", "RunSteps that failed a session.")
                       ->WithLabels({});
  workers_registered_ =
      r.AddGauge("meshrt_coordinator_workers_registered", "Workers registered.")->WithLabels({});
  workers_alive_ = r.AddGauge("meshrt_coordinator_workers_alive",
                              "Registered workers whose last heartbeat is recent.")
                       ->WithLabels({});
  workers_busy_ =
      r.AddGauge("meshrt_coordinator_workers_busy", "Workers held by a session.")->WithLabels({});
  missed_heartbeats_ = r.AddCounter("meshrt_coordinator_missed_heartbeats_total",
                                    "Heartbeat intervals in which a worker sent none.")
                           ->WithLabels({});
  heartbeat_timeouts_ = r.AddCounter("meshrt_coordinator_heartbeat_timeouts_total",
                                     "Workers dropped for sending no heartbeat within "
                                     "--heartbeat_timeout_ms.")
                            ->WithLabels({});
  sessions_ = r.AddGauge("meshrt_coordinator_sessions", "Sessions by state.", {"state"});
  rpc_errors_ = r.AddCounter("meshrt_coordinator_rpc_errors_total",
                             "gRPC calls the coordinator answered with an error, by method and code.",
                             {"method", "code"});
  checkpoint_saves_ =
      r.AddCounter("meshrt_checkpoint_saves_total", "Checkpoint saves, by result.", {"result"});
  checkpoint_save_duration_ = r.AddHistogram("meshrt_checkpoint_save_duration_seconds",
                                             "Wall time of the checkpoint saves that succeeded.",
                                             {}, DurationBuckets())
                                  ->WithLabels({});
  checkpoint_restores_ = r.AddCounter("meshrt_checkpoint_restores_total",
                                      "Checkpoint restores, by result.", {"result"});
  for (const char* result : {"ok", "error"}) {
    checkpoint_saves_->WithLabels({result});
    checkpoint_restores_->WithLabels({result});
  }
  SetSessions({});
}

const std::vector<std::string>& CoordinatorMetrics::SessionStates() {
  static const std::vector<std::string>* const kStates =
      new std::vector<std::string>{"creating", "ready", "running", "failed", "expired"};
  return *kStates;
}

void CoordinatorMetrics::StepsDone(const std::string& session, int64_t steps, absl::Duration wall,
                                   int64_t tokens_per_step) {
  if (steps < 1) return;
  step_duration_->WithLabels({session})->Observe(absl::ToDoubleSeconds(wall) / steps, steps);
  steps_->WithLabels({session})->Increment(static_cast<double>(steps));
  if (tokens_per_step > 0) {
    tokens_->WithLabels({session})->Increment(static_cast<double>(steps * tokens_per_step));
  }
}

void CoordinatorMetrics::SessionEnded(const std::string& session) {
  absl::MutexLock lock(&mu_);
  if (std::find(ended_.begin(), ended_.end(), session) != ended_.end()) return;
  ended_.push_back(session);
  while (ended_.size() > static_cast<size_t>(kRetainedSessions)) {
    const LabelValues old = {ended_.front()};
    step_duration_->Remove(old);
    steps_->Remove(old);
    tokens_->Remove(old);
    ended_.pop_front();
  }
}

void CoordinatorMetrics::RpcDone(absl::string_view method, absl::StatusCode code) {
  if (code == absl::StatusCode::kOk) return;
  rpc_errors_->WithLabels({std::string(method), absl::StatusCodeToString(code)})->Increment();
}

void CoordinatorMetrics::CheckpointSaved(bool ok, absl::Duration took) {
  checkpoint_saves_->WithLabels({ok ? "ok" : "error"})->Increment();
  if (ok) checkpoint_save_duration_->Observe(absl::ToDoubleSeconds(took));
}

void CoordinatorMetrics::CheckpointRestored(bool ok) {
  checkpoint_restores_->WithLabels({ok ? "ok" : "error"})->Increment();
}

void CoordinatorMetrics::SetWorkers(int64_t registered, int64_t alive, int64_t busy) {
  workers_registered_->Set(static_cast<double>(registered));
  workers_alive_->Set(static_cast<double>(alive));
  workers_busy_->Set(static_cast<double>(busy));
}

void CoordinatorMetrics::SetSessions(const std::map<std::string, int64_t>& by_state) {
  for (const std::string& state : SessionStates()) {
    auto it = by_state.find(state);
    sessions_->WithLabels({state})->Set(it == by_state.end() ? 0 : static_cast<double>(it->second));
  }
}

int64_t CoordinatorMetrics::TokensPerStep(const Graph& graph) {
  int64_t tokens = 0;
  for (const v1::Op& op : graph.proto().ops()) {
    if (op.type() != "text_windows") continue;
    auto offset = op.attrs().find("offset");
    if (offset != op.attrs().end() && offset->second.i() != 0) continue;  // targets
    auto split = op.attrs().find("split");
    if (split != op.attrs().end() && split->second.s() == "eval") continue;
    if (!graph.HasTensor(op.name())) continue;
    tokens += graph.type(op.name()).shape.num_elements();
  }
  return tokens;
}

// The coordinator's collector (registered by its constructor): the gauges from the registry and
// the sessions, under the coordinator's lock for a moment.
void Coordinator::CollectMetrics() {
  int64_t registered = 0, alive = 0, busy = 0;
  std::map<std::string, int64_t> by_state;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    const absl::Duration stale = StaleHeartbeat();
    for (const auto& [id, w] : workers_) {
      ++registered;
      alive += now - w->last_heartbeat <= stale;
      busy += !w->session.empty();
    }
    for (const auto& [id, s] : sessions_) {
      const char* state = s->expired         ? "expired"
                          : !s->failed.ok()  ? "failed"
                          : s->creating      ? "creating"
                          : s->cancel != nullptr ? "running"
                                                 : "ready";
      ++by_state[state];
    }
  }
  metrics_.SetWorkers(registered, alive, busy);
  metrics_.SetSessions(by_state);
}

}  // namespace meshrt
