// WorkerAgent: a worker's membership of the cluster, from registration to leaving it.
//
//   Start()  registers with the coordinator (retrying with backoff until it answers, for up to
//            `register_timeout`), then heartbeats on a thread of its own every interval the
//            coordinator asked for. A heartbeat answered "reregister" (the coordinator dropped
//            this worker or restarted) or refused for its credential registers again; the
//            sessions held from before are then closed (nobody will run them any more).
//   Drain()  a graceful leave (SIGTERM): heartbeats stop, the worker is reported not ready, one
//            last heartbeat says `draining`, the calls in flight get up to `drain_timeout` to
//            finish, then the worker deregisters. Returns whether they all finished.
//   Stop()   stops the heartbeats now, without telling the coordinator (it notices the silence).
//
// Every wait is bounded: each coordinator call has a timeout, and Stop() ends a backoff or an
// interval at once. `interrupt` (optional, e.g. set by a signal handler) also ends registration
// retries. Thread-safe: Stop() and Drain() may be called from any thread, Start() once.
#ifndef MESHRT_WORKER_WORKER_AGENT_H_
#define MESHRT_WORKER_WORKER_AGENT_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "worker/coordinator_client.h"
#include "worker/worker.h"

namespace meshrt {

struct WorkerAgentOptions {
  // What the worker registers with (address, Gloo address, incarnation, secret, rank, memory).
  v1::RegisterWorkerRequest registration;
  // The coordinator's address, for log lines only.
  std::string coordinator;
  // Give up registering when the coordinator has not answered for this long.
  absl::Duration register_timeout = absl::Seconds(120);
  // Timeout of one registration call.
  absl::Duration register_call_timeout = absl::Seconds(5);
  // Backoff between registration attempts: doubles from `initial` up to `max`.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
  // Heartbeats go no more often than this, whatever the coordinator asks.
  absl::Duration min_heartbeat_interval = absl::Milliseconds(100);
  // How long Drain() lets the calls in flight finish.
  absl::Duration drain_timeout = absl::Seconds(20);
  // Timeouts of Drain()'s last heartbeat and of deregistering.
  absl::Duration last_heartbeat_timeout = absl::Seconds(2);
  absl::Duration deregister_timeout = absl::Seconds(5);
};

// What the agent drives besides the coordinator. All are optional.
struct WorkerAgentHooks {
  // The cluster token to present, looked up again before every registration attempt (an error
  // keeps the current one).
  std::function<absl::StatusOr<std::string>()> cluster_token;
  // Reports the worker ready to serve (true once registered) or not (false when draining).
  std::function<void(bool)> set_ready;
  // Refuses new calls and waits up to its argument for those in flight; returns whether none is
  // left (GrpcWorkerService::Drain).
  std::function<bool(absl::Duration)> drain_calls;
  // When it becomes true, registration stops retrying (a signal handler's flag).
  const std::atomic<bool>* interrupt = nullptr;
};

class WorkerAgent {
 public:
  // `coordinator` and `worker` are borrowed and must outlive the agent.
  WorkerAgent(WorkerAgentOptions options, CoordinatorClient* coordinator, Worker* worker,
              WorkerAgentHooks hooks = WorkerAgentHooks());
  ~WorkerAgent();  // Stop()

  // Registers, then starts heartbeating. The last registration error when the coordinator did
  // not answer within `register_timeout` (or Stop or `interrupt` came first).
  absl::Status Start();
  // Leaves gracefully (see the top of this file); returns whether the calls in flight finished.
  bool Drain();
  // Stops the heartbeats and returns within one heartbeat call's timeout. Idempotent.
  void Stop();

  // The id the coordinator gave at the latest registration (-1 before).
  int worker_id() const;
  // The interval heartbeats are sent at.
  absl::Duration heartbeat_interval() const;

 private:
  // Register with retries and backoff; the last error when giving up.
  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWithRetry();
  // Closes the sessions of `held` after registering again as `r` says.
  void Adopt(const v1::RegisterWorkerResponse& r, const std::vector<std::string>& held);
  void HeartbeatLoop();
  void HeartbeatOnce();
  v1::HeartbeatRequest MakeHeartbeat(bool draining) const;
  // Waits up to `d`; false when stopping.
  bool SleepUnlessStopped(absl::Duration d);
  bool Stopping() const;
  std::string DeregisterReason(bool idle) const;

  const WorkerAgentOptions options_;
  CoordinatorClient* const coordinator_;
  Worker* const worker_;
  const WorkerAgentHooks hooks_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int worker_id_ ABSL_GUARDED_BY(mu_) = -1;
  std::string coordinator_incarnation_ ABSL_GUARDED_BY(mu_);
  absl::Duration interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  std::thread heartbeats_;
  absl::Mutex join_mu_;  // serialises joining `heartbeats_`
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_WORKER_AGENT_H_
