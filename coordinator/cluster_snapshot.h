// What the coordinator's dashboard shows, as plain data: Coordinator::Snapshot() copies the
// registry and the sessions into these under short locks; coordinator/dashboard.h turns them into
// JSON. Everything here is a copy: safe to read on any thread, stale as soon as it is made.
#ifndef MESHRT_COORDINATOR_CLUSTER_SNAPSHOT_H_
#define MESHRT_COORDINATOR_CLUSTER_SNAPSHOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/step_history.h"
#include "proto/session.pb.h"

namespace meshrt {

struct WorkerSnapshot {
  int id = -1;
  int rank = -1;  // -1 = none
  std::string address;
  std::string gloo_address;
  // "idle" (registered, no session), "busy" (in a session), "draining" (shutting down: it
  // finishes its step in flight, then leaves), "lost" (heartbeats stale beyond the coordinator's
  // limit, or dropped recently: `lost_why` says why).
  std::string state;
  std::string session;               // "" when idle
  std::vector<int64_t> coordinate;   // its mesh coordinate in `session`
  int64_t heartbeat_age_ms = 0;      // since its last heartbeat (for a dropped one: since then)
  std::optional<v1::WorkerActivity> activity;  // what its step thread did at that heartbeat
  std::string lost_why;              // a dropped worker: why
  absl::Time lost_at;                // a dropped worker: when
};

struct SessionSnapshot {
  std::string id;
  std::string owner;     // the client name that created it ("" = an operator / in-process)
  std::string mesh;      // "rows:2,cols:2"
  std::string layout;    // "batch:rows,hidden:cols"
  std::string state;     // "ready", "running" (a step in flight), "failed", "expired"
  int64_t step = 0;      // steps run so far
  double steps_per_second = 0;  // over its recent steps (StepHistory::StepsPerSecond)
  int64_t age_ms = 0;
  std::string last_error;
  std::string loss_tensor;   // a training session's loss ("" = not a training session)
  std::optional<float> last_loss;
  std::vector<int> worker_ids;  // by processor number
};

struct ClusterSnapshot {
  absl::Time at;
  std::vector<WorkerSnapshot> workers;  // live ones by id, then the recently lost, newest first
  std::vector<SessionSnapshot> sessions;
  std::vector<std::string> waiting;     // CreateSession calls waiting for workers
  std::vector<ErrorEvent> errors;       // newest first
};

// One session in detail: its row, its loss curve, and its layout as `meshrt explain` shows it.
struct SessionDetail {
  SessionSnapshot session;
  std::vector<LossPoint> loss;
  std::vector<MetricCurve> metrics;  // what its client recorded (RecordMetrics), by name
  // The layout report of CreateSessionResponse.explain (tensors, slices, collectives, memory).
  std::string explain_text;
  // core/planning/explain.h ExplainProgramJson under the coordinator's profile: tensors, their slices,
  // collectives with their bytes, per-op predictions and the predicted step time. "" when the
  // cost model refused the program (explain_error says why).
  std::string explain_json;
  std::string explain_error;
  // An auto_layout session: the planner's report (core/planning/planner.h ExplainPlan) and its predicted
  // step time for the chosen candidate; else "" and 0.
  std::string plan_text;
  double planned_step_seconds = 0;
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_CLUSTER_SNAPSHOT_H_
