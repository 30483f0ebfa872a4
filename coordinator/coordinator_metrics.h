// The coordinator's Prometheus metrics (monitoring/metrics.h), served on its /metrics:
//
//   meshrt_step_duration_seconds{session}            histogram  wall time of a step as the
//       coordinator runs it (feeds sliced and sent, every worker's part, fetches assembled); a
//       RunStep of n repetitions counts n steps of its mean duration
//   meshrt_steps_total{session}                      counter    steps run to completion
//   meshrt_tokens_total{session}                     counter    tokens the steps consumed (below)
//   meshrt_step_failures_total                       counter    RunSteps that failed a session
//   meshrt_coordinator_workers_registered            gauge
//   meshrt_coordinator_workers_alive                 gauge      heartbeat within the stale limit
//                                                               (max(3 heartbeat intervals, 2 s))
//   meshrt_coordinator_workers_busy                  gauge      in a session
//   meshrt_coordinator_missed_heartbeats_total       counter    heartbeat intervals workers skipped
//   meshrt_coordinator_heartbeat_timeouts_total      counter    workers dropped as silent
//   meshrt_coordinator_sessions{state}               gauge      creating, ready, running, failed,
//                                                               expired (every state, 0 included)
//   meshrt_coordinator_rpc_errors_total{method,code} counter    gRPC calls answered with an error;
//                                                               code as absl names it (NOT_FOUND)
//   meshrt_checkpoint_saves_total{result}            counter    result ok / error
//   meshrt_checkpoint_save_duration_seconds          histogram  of the saves that succeeded
//   meshrt_checkpoint_restores_total{result}         counter
//   and the process metrics (monitoring/process_metrics.h; the daemon adds them).
//
// Tokens: a step's tokens are the elements of the training inputs its graph reads with
// `text_windows` ops (core/ops/ops_dataset.h) that are not targets (attr offset 0) and not the eval
// split: batch × length of the Transformer LM's input window per step. A session fed from
// placeholders (the MLP, `meshrt run`) has no token count: its `meshrt_tokens_total` series is
// never created.
//
// Sessions: the per-session series outlive their session for the last kRetainedSessions sessions
// that ended (so a scrape after a short run still sees it); older ones are removed. Session ids
// never repeat, so a removed series never comes back and counters stay monotonic per series.
//
// Thread-safety: thread-safe.
#ifndef MESHRT_COORDINATOR_COORDINATOR_METRICS_H_
#define MESHRT_COORDINATOR_COORDINATOR_METRICS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/ops/graph.h"
#include "monitoring/metrics.h"

namespace meshrt {

class CoordinatorMetrics {
 public:
  static constexpr int kRetainedSessions = 32;

  CoordinatorMetrics();
  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  MetricsRegistry& registry() { return registry_; }

  // `steps` steps of `session` completed in `wall`; each consumed `tokens_per_step` tokens (0: not
  // counted).
  void StepsDone(const std::string& session, int64_t steps, absl::Duration wall,
                 int64_t tokens_per_step);
  void StepFailed() { step_failures_->Increment(); }
  // The session ended (closed, or forgotten after expiring): its series stay for a while (above).
  void SessionEnded(const std::string& session);

  void HeartbeatsMissed(int64_t n) { missed_heartbeats_->Increment(static_cast<double>(n)); }
  void HeartbeatTimeout() { heartbeat_timeouts_->Increment(); }
  // A gRPC method answered with `code` (OK is not counted).
  void RpcDone(absl::string_view method, absl::StatusCode code);
  void CheckpointSaved(bool ok, absl::Duration took);
  void CheckpointRestored(bool ok);
  // The gauges a scrape sets from the coordinator's state (its collector).
  void SetWorkers(int64_t registered, int64_t alive, int64_t busy);
  void SetSessions(const std::map<std::string, int64_t>& by_state);

  // The session states meshrt_coordinator_sessions reports.
  static const std::vector<std::string>& SessionStates();

  // Tokens one step of `graph` consumes (see above); 0 when it reads none with text_windows.
  static int64_t TokensPerStep(const Graph& graph);

 private:
  MetricsRegistry registry_;
  MetricFamily<Histogram>* step_duration_;
  MetricFamily<Counter>* steps_;
  MetricFamily<Counter>* tokens_;
  Counter* step_failures_;
  Gauge* workers_registered_;
  Gauge* workers_alive_;
  Gauge* workers_busy_;
  Counter* missed_heartbeats_;
  Counter* heartbeat_timeouts_;
  MetricFamily<Gauge>* sessions_;
  MetricFamily<Counter>* rpc_errors_;
  MetricFamily<Counter>* checkpoint_saves_;
  Histogram* checkpoint_save_duration_;
  MetricFamily<Counter>* checkpoint_restores_;

  absl::Mutex mu_;
  // Sessions that ended, oldest first, whose series are still exported.
  std::deque<std::string> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_COORDINATOR_METRICS_H_
