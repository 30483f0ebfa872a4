// Internal to //coordinator:coordinator: the coordinator's per-worker and per-session records and
// small helpers shared by coordinator.cc (registry, sessions), coordinator_step.cc (RunStep) and
// coordinator_checkpoints.cc (SaveCheckpoint, RestoreCheckpoint).
#ifndef MESHRT_COORDINATOR_COORDINATOR_INTERNAL_H_
#define MESHRT_COORDINATOR_COORDINATOR_INTERNAL_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/coordinator.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "proto/program.pb.h"
#include "rpc/error_origin.h"

namespace meshrt {

struct Coordinator::WorkerEntry {
  int id = 0;
  std::string address;
  std::string gloo_address;
  std::string incarnation;
  std::string secret;  // the worker's credential (RegisterWorkerRequest.secret); never listed
  int rank = -1;  // stable rank (pod ordinal), -1 = none
  int64_t available_memory_bytes = 0;  // as registered; 0 = unknown
  absl::Time last_heartbeat;
  // What its step thread did for `session` at the last heartbeat (none before a report).
  std::optional<v1::WorkerActivity> activity;
  bool draining = false;  // its last heartbeat said it is shutting down (HeartbeatRequest.draining)
  std::string session;  // empty when free
  std::vector<int64_t> coordinate;
  std::shared_ptr<WorkerClient> client;
};

struct Coordinator::Session {
  std::string id;
  Caller owner;
  std::string kv_prefix;  // registered in kv_ (set under Coordinator::mu_); empty until then
  Graph graph;
  v1::Program program;
  Mesh mesh;
  std::vector<int> worker_ids;  // by processor number
  std::vector<std::string> addresses;
  std::vector<std::shared_ptr<WorkerClient>> clients;
  std::map<std::string, v1::ProgramTensor> outputs;  // by tensor name
  absl::Mutex step_mu;
  std::atomic<int64_t> step{0};  // written under step_mu; read by ListWorkers without it
  absl::Time created = absl::Now();
  std::string layout;  // the layout rules as text
  StepDurations durations;  // of its recent steps, for the stuck-step watchdog; under step_mu
  // Guarded by Coordinator::mu_.
  absl::Status failed;
  std::shared_ptr<Cancellation> cancel;
  bool released = false;
  // Until CreateSession returns it to its client, the lease does not run (the client cannot renew
  // a session whose id it does not know yet).
  bool creating = true;
  absl::Time lease_renewed = absl::Now();  // the last sign of life of its client
  bool expired = false;  // its lease ran out: `failed` says so, its workers are released
  absl::Time expired_at;
  // For the dashboard (coordinator_snapshot.cc), set by CreateSession before the session is
  // listed and constant afterwards: its layout report, the planner's report and predicted step
  // time (auto_layout sessions), and a training session's loss tensor (else "").
  std::string explain_text;
  std::string plan_text;
  double planned_step_seconds = 0;
  std::string loss_tensor;
  // Tokens a step reads (CoordinatorMetrics::TokensPerStep), counted once at creation.
  int64_t tokens_per_step = 0;
  StepHistory history;  // its completed steps and losses (locks of its own)
  // The cost model's JSON report, computed at the first dashboard request for it.
  absl::Mutex explain_mu;
  std::optional<std::string> explain_json ABSL_GUARDED_BY(explain_mu);
  std::string explain_error ABSL_GUARDED_BY(explain_mu);
};

namespace coordinator_internal {

inline std::string CoordString(const std::vector<int64_t>& c) {
  return absl::StrCat("(", absl::StrJoin(c, ","), ")");
}

// A worker marks the errors it reports itself (rpc/error_origin.h); an Unavailable or
// DeadlineExceeded without the mark came from the transport: the process is gone or unreachable.
inline bool IsTransportFailure(const absl::Status& s) {
  return (s.code() == absl::StatusCode::kUnavailable ||
          s.code() == absl::StatusCode::kDeadlineExceeded) &&
         !IsWorkerReported(s);
}

// Runs fn(i) for i in [0, n) on n threads and waits for all.
template <typename Fn>
void ParallelFor(int n, Fn fn) {
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) threads.emplace_back([&fn, i] { fn(i); });
  for (std::thread& t : threads) t.join();
}

}  // namespace coordinator_internal
}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_COORDINATOR_INTERNAL_H_
