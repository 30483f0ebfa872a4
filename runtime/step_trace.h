// StepTraceRecorder: the timeline of one step on one processor, for `meshrt run --trace` and
// `meshrt train --trace` (client/chrome_trace.h turns it into a Chrome trace-event file).
//
// The executor (executor.h set_trace) records, while a recorder is set:
//   - OP: each local op and local slice the step thread runs (fused groups of core/ir/step_fusion.h
//     as one event named by the instruction that runs them; a skipped guarded instruction with
//     `skipped`), from just before its kernel to just after its output is stored.
//   - COLLECTIVE: each collective (a fused group of deferred allreduces as one event with `fused`
//     members and their total bytes) on the thread that ran it: the communication thread with
//     overlap, the step thread without overlap, for a group of one, or when the step thread took
//     a queued collective itself. From when that thread starts it (taking its output from the
//     pool, then the communicator call) to when its result is stored.
//   - WAIT: the step thread blocked (on the executor's condition) until a collective it needs has
//     finished: exposed communication. `instruction` names the earliest unfinished collective,
//     the one it waits for. Time the step thread spends running a queued collective itself is that
//     COLLECTIVE event, not a WAIT.
// Events of one thread never overlap. Times are microseconds since Begin on the steady clock
// (CLOCK_MONOTONIC on Linux: one clock for every process of a host, named by the host's boot id).
//
// Waiting for peers vs transfer: a processor cannot see inside its communicator call when its
// peers arrived (Gloo's algorithms wait inside the library). The coordinator, which gets every
// member's COLLECTIVE events, computes it where the members share a clock: the wait is the time
// from this member entering the collective until the last member of its group entered it (no
// member can have the result before then); the rest of the call is transfer (moving and reducing
// data, including waiting for data in flight). coordinator/step_traces.h.
//
// Cost when off: the executor tests one pointer per instruction. When on: two clock reads and one
// vector append under a mutex per instruction.
//
// Thread-safety: Add and Now may be called from any thread while a step runs (the step thread and
// the communication thread both add); Begin and Finish by the step thread, not while a step runs.
#ifndef MESHRT_RUNTIME_STEP_TRACE_H_
#define MESHRT_RUNTIME_STEP_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/session.pb.h"

namespace meshrt {

class StepTraceRecorder {
 public:
  StepTraceRecorder() = default;
  StepTraceRecorder(const StepTraceRecorder&) = delete;
  StepTraceRecorder& operator=(const StepTraceRecorder&) = delete;

  // Starts step `step`: notes the clock, forgets earlier events.
  void Begin(int64_t step);
  // Microseconds since Begin.
  int64_t Now() const;
  // Records an event (start_us and dur_us already relative to Begin).
  void Add(v1::TraceEvent event);
  // Adds an event of `kind` on `thread` from `start_us` to now.
  void AddSpan(v1::TraceEvent::Kind kind, v1::TraceEvent::Thread thread, int instruction,
               int64_t start_us, int64_t bytes = 0, int fused = 0);
  // The step's trace: its events sorted by start (then by thread), the step's duration up to
  // now, its clock. Leaves the recorder empty.
  v1::StepTrace Finish();

  // The monotonic clock's identity: the host's boot id (/proc/sys/kernel/random/boot_id), or
  // "pid:<pid>" where it cannot be read (then no other process shares it).
  static const std::string& ClockId();
  // The steady clock now, microseconds.
  static int64_t MonotonicMicros();

 private:
  int64_t step_ = 0;
  int64_t origin_us_ = 0;  // MonotonicMicros at Begin; written only between steps
  absl::Mutex mu_;
  std::vector<v1::TraceEvent> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_STEP_TRACE_H_
