// The coordinator's stuck-step watchdog, without gRPC or the coordinator's state: how long a step
// may run, which step of a request is in progress, and — when one runs too long — which processor
// the others are waiting for, from the activities the workers send with their heartbeats
// (proto WorkerActivity, runtime/step_activity.h).
//
// A step is stuck when it has run longer than max(min, factor × the median of the session's recent
// step times) (StuckStepOptions; the coordinator's --stuck_step_min_ms and --stuck_step_factor).
// Steps are counted by the activities' step numbers, so a request of N steps (RunSteps) is N steps
// each with its own limit, not one long one.
//
// Thread-compatible: the coordinator keeps one StepDurations per session and one StepProgress per
// request, both under the session's step lock.
#ifndef MESHRT_COORDINATOR_STUCK_STEP_H_
#define MESHRT_COORDINATOR_STUCK_STEP_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/session.pb.h"

namespace meshrt {

struct StuckStepOptions {
  // The least time a step may take before it counts as stuck. Zero or negative: no watchdog.
  absl::Duration min = absl::Seconds(10);
  // How many times the median of the session's recent step times a step may take.
  double factor = 5;
};

// The durations of a session's last kKeep steps.
class StepDurations {
 public:
  static constexpr int kKeep = 32;
  void Add(absl::Duration d);
  // The median of the kept durations; zero when there are none.
  absl::Duration Median() const;
  int size() const { return static_cast<int>(recent_.size()); }

 private:
  std::deque<absl::Duration> recent_;
};

// max(options.min, options.factor × durations.Median()).
absl::Duration StuckStepLimit(const StuckStepOptions& options, const StepDurations& durations);
// "10 s (max of --stuck_step_min_ms=10000 and --stuck_step_factor=5 × the median step time
// 12 ms)": the limit as an error states it.
std::string DescribeStuckStepLimit(const StuckStepOptions& options, const StepDurations& durations);

// One processor of a session as the coordinator last heard from it.
struct ProcessorView {
  int processor = 0;  // its number in the mesh (row-major)
  int worker_id = -1;
  std::string address;
  std::vector<int64_t> coordinate;
  bool registered = true;                      // false: its worker has been dropped
  absl::Duration heartbeat_age;                // since its last heartbeat (and so since `activity`)
  std::optional<v1::WorkerActivity> activity;  // its latest report for this session, if any
};

// Which step of one request (steps first..last) is in progress: the lowest step any processor is
// on, as their activities say (a processor that has reported nothing for the session yet counts
// as on the first step), and since when.
class StepProgress {
 public:
  StepProgress(int64_t first_step, int64_t last_step, absl::Time start);
  // Takes in the processors' latest activities at `now`. When the step in progress advanced, the
  // steps completed meanwhile go into `durations`, each (now - since) / their number.
  void Update(const std::vector<ProcessorView>& processors, absl::Time now,
              StepDurations* durations);
  // The request completed at `now`: its steps not yet counted go into `durations`.
  void Finish(absl::Time now, StepDurations* durations);
  int64_t step() const { return step_; }
  absl::Duration elapsed(absl::Time now) const { return now - since_; }
  // Whether any processor has reported an activity for the session (without any, as with
  // in-process test workers that send no heartbeats, there is nothing to judge by).
  bool reported() const { return reported_; }

 private:
  const int64_t first_step_, last_step_;
  int64_t step_;
  absl::Time since_;
  bool reported_ = false;
};

// Why step `step` has not completed after `elapsed` (over `limit_text`): which processors the
// others wait for and where each of them is. Those whose heartbeats stopped (older than
// `stale_heartbeat`) come first — "not responding"; otherwise the ones furthest behind in the
// step's common instruction sequence (by step, then WorkerActivity.ordinal); when every processor
// is at the same place, all of them (a collective that does not complete, or a slow kernel).
struct StuckDiagnosis {
  std::vector<int> behind;  // processor numbers
  std::string message;
};
StuckDiagnosis DiagnoseStuckStep(int64_t step, absl::Duration elapsed,
                                 const std::string& limit_text,
                                 const std::vector<ProcessorView>& processors,
                                 absl::Duration stale_heartbeat);

// How the coordinator names a worker whose RPC failed in transport (`status`): "is not
// responding (no heartbeat for 4.2 s ...)" when its heartbeats stopped too (older than
// `stale_heartbeat`; e.g. a stopped process) or it answers no keepalive pings, "is unreachable:
// its process is gone ..." when the
// connection was refused or reset, else "is unreachable (it died or its network failed)"; then
// the status's message.
std::string DescribeLostWorker(const absl::Status& status,
                               std::optional<absl::Duration> heartbeat_age,
                               absl::Duration stale_heartbeat);

// "12 ms", "10.2 s".
std::string ShortDuration(absl::Duration d);

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_STUCK_STEP_H_
