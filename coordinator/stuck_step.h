// The coordinator's stuck-step watchdog, without gRPC or the coordinator's state: how long a step
// may run, which step of a request is in progress, and — when one runs too long — which processor
// the others are waiting for, from the activities the workers send with their heartbeats
// (proto WorkerActivity, runtime/step_activity.h).
//
// The limit L of a step is max(min, factor × the median of the session's recent step times)
// (StuckStepOptions; the coordinator's --stuck_step_min_ms and --stuck_step_factor). Steps are
// counted by the activities' step numbers, so a request of N steps (RunSteps) is N steps each with
// its own limit, not one long one.
//
// Slow is not stuck. A step that has run longer than L is judged by the processors the others wait
// for (DiagnoseStuckStep's `behind`) and by their step threads' CPU time (ComputeWatch): a
// processor is *computing* when its step thread used at least StuckStepOptions::computing_share of
// one core over the last cpu_window of its step. Precisely (JudgeStep), with E the time the step
// has been in progress and, for each processor p behind, Q(p) the time since p was last seen
// computing in this step (E when it never was, its CPU time is unknown, or it is not responding):
//   - E <= L: within the limit;
//   - E > L and Q(p) <= L for every p behind: slow, not stuck — not failed; the coordinator logs
//     one WARNING per step naming them;
//   - E > L and Q(p) > L for some p behind: stuck — the step fails, naming them.
// So a step whose laggards compute is never failed by the watchdog (an endless busy loop is bounded
// by the step timeout only), and one whose laggards stop computing fails L after they stopped. A
// frozen or blocked thread accrues no CPU time, nor does one waiting in a collective (Gloo waits on
// a condition variable, the same-host path on a futex); a stopped process sends no heartbeats and
// is not responding (Q = E whatever it computed before). Each is stuck as soon as E > L when it
// has not computed in the step, as before the CPU time was measured, else L after it stopped.
//
// Thread-compatible: the coordinator keeps one StepDurations per session and one StepProgress and
// one ComputeWatch per request, all under the session's step lock.
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
  // A processor computes when its step thread used at least this share of one core over the last
  // `cpu_window` of its step. A blocked thread uses well under 1%; a computing one 100% on an idle
  // machine, and still a half or a third where workers share cores; a quarter keeps both apart.
  double computing_share = 0.25;
  // Over how much of a step's wall time (the worker's clock, between two of its reports) the share
  // is measured: the latest report against the newest one at least this much older. Keep it well
  // under `min` (and over the heartbeat interval): until a step has run this long, its share is
  // unknown and it is judged as stuck.
  absl::Duration cpu_window = absl::Seconds(1);
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
  // Filled in by ComputeWatch::Update: its step thread's share of one core over the last window
  // (nullopt: unknown), whether that share is computing, and how long ago it was last seen
  // computing in its step (nullopt: never).
  std::optional<double> cpu_share;
  bool computing = false;
  std::optional<absl::Duration> computed_ago;
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
  // True the first time it is called for the step in progress, false after: one WARNING per slow
  // step.
  bool FirstSlowWarning();

 private:
  const int64_t first_step_, last_step_;
  int64_t step_;
  absl::Time since_;
  bool reported_ = false;
  int64_t warned_step_ = 0;
};

// Whether the processors' step threads are computing, from the CPU times in their reports
// (WorkerActivity.step_cpu_ms and step_ms, both the worker's measurements at the same moment).
// A processor's share of one core is (Δ step_cpu_ms) / (Δ step_ms) between its latest report and
// the newest earlier report of the same step at least options.cpu_window older. It is unknown
// (nullopt) while its step is younger than that, when its reports carry no CPU time, while its
// heartbeats are stale, and when it runs no step. It computes when its share is at least
// options.computing_share; it was last seen computing when such a report arrived (now minus the
// report's heartbeat age). Everything starts afresh when the processor's step changes.
class ComputeWatch {
 public:
  explicit ComputeWatch(const StuckStepOptions& options);
  // Takes in the processors' latest activities at `now` (the same report seen again is no news),
  // and fills in each one's cpu_share and computed_ago. Heartbeats older than `stale_heartbeat`
  // give no share.
  void Update(std::vector<ProcessorView>* processors, absl::Time now,
              absl::Duration stale_heartbeat);

 private:
  struct Report {
    int64_t step_ms = 0;
    int64_t cpu_ms = 0;
  };
  struct History {
    int64_t step = 0;
    std::deque<Report> reports;  // of `step`, oldest first
    std::optional<double> share;
    std::optional<absl::Time> last_computing;
  };
  const double computing_share_;
  const int64_t window_ms_;
  std::vector<History> histories_;  // by processor number
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

// What the watchdog makes of step `step` of a request, in progress for `elapsed` with limit `limit`
// (as text: `limit_text`), from the processors' views with cpu_share and computed_ago filled in
// (ComputeWatch::Update): see the rules at the top of this file.
struct StepVerdict {
  enum class Kind { kWithinLimit, kSlow, kStuck };
  Kind kind = Kind::kWithinLimit;
  std::vector<int> behind;  // kSlow, kStuck: the processors the others wait for
  // kSlow: the warning ("step 3 has run for 14.2 s, over ... but processor 1 ... is still computing
  // ...: slow, not stuck"); kStuck: the error (DiagnoseStuckStep's message).
  std::string message;
};
StepVerdict JudgeStep(int64_t step, absl::Duration elapsed, absl::Duration limit,
                      const std::string& limit_text, const std::vector<ProcessorView>& processors,
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
