// StepActivity: what the step thread of one session is doing right now — which step, which
// instruction it entered last, and since when. The worker sends it with every heartbeat; the
// coordinator names a stuck rank from the processors' activities (coordinator/stuck_step.h) and
// `meshrt status --session` shows them.
//
// Cost: Executor calls Enter() before every instruction it runs: a coarse monotonic clock read
// and a few relaxed atomic stores under a sequence counter (a seqlock: the one writer never waits,
// readers retry), no lock and no allocation; about 10 ns. Only indices are stored; whoever reads a
// Snapshot turns the instruction index into names with the program (it knows the program). Times
// have the coarse clock's resolution (a few milliseconds).
//
// Overlap (executor.h): collectives may run on the executor's communication thread, which reports
// nothing; the step thread enters them when it issues them, and while it waits for one (WaitsIn)
// the activity names that collective, so a rank waiting for a peer shows the collective it waits
// in, as without overlap.
//
// Ordinal: the number of Enter calls in the step so far. Every processor of a session runs the
// same plan and enters the same instructions in the same order, so ordinals compare across
// processors: the lowest is the furthest behind. (Instruction indices do not: deferred allreduces
// run after later instructions.)
//
// Abort(): the session is going away (closed, or its step declared stuck). Enter() returns false
// from then on, and the executor ends the step with Aborted at the next instruction boundary.
// An instruction already running (a kernel, a collective) is not interrupted.
//
// FreezeAt() (fault injection for tests: a worker's --debug_freeze_at_step): Enter() blocks
// before the matching instruction of the matching step until Abort(); the heartbeats meanwhile
// report the frozen instruction, as for a rank stuck for real. SpinAt() (--debug_spin_at_step)
// busy-loops there instead, burning the step thread's CPU for a while, then goes on: a rank that
// is slow, not stuck.
//
// CPU time: BeginStep notes the step thread's CPU clock (pthread_getcpuclockid) and its reading;
// Read() reads that clock again (one clock_gettime, a system call, in Read only; nothing per
// instruction) and reports the CPU time the thread consumed in the step so far. A thread blocked
// (frozen, or waiting on a condition variable or futex in a collective) accrues none; one running
// a kernel (OpenBLAS runs single-threaded in the calling thread here) accrues up to its wall time.
// Unknown (nullopt) when the clock cannot be had or read (e.g. the thread ended meanwhile) and
// between steps.
//
// Thread-safety: thread-safe. BeginStep/Enter/EndStep are called by the one step thread; Read,
// Abort, FreezeAt and SpinAt by any thread.
#ifndef MESHRT_RUNTIME_STEP_ACTIVITY_H_
#define MESHRT_RUNTIME_STEP_ACTIVITY_H_

#include <time.h>

#include <atomic>
#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace meshrt {

class StepActivity {
 public:
  StepActivity();
  StepActivity(const StepActivity&) = delete;
  StepActivity& operator=(const StepActivity&) = delete;

  struct Snapshot {
    int64_t step = 0;        // the step running, or (running == false) the last one run; 0: none
    bool running = false;    // between BeginStep and EndStep
    int instruction = -1;    // program index entered last in this step; -1: none yet
    int64_t ordinal = 0;     // Enter calls in this step so far
    absl::Duration in_step;  // since BeginStep (running) or since EndStep (idle)
    absl::Duration in_instruction;  // since the last Enter (or BeginStep when none)
    // Running: the CPU time the step thread consumed since BeginStep; nullopt when unknown (the
    // clock could not be read) or idle.
    std::optional<absl::Duration> step_cpu;
    bool frozen = false;    // blocked by FreezeAt
    bool spinning = false;  // busy-looping by SpinAt
    bool aborted = false;
  };

  // Step thread: the start and end of step `step` (the coordinator's step number).
  void BeginStep(int64_t step);
  void EndStep();
  // Step thread, before running program instruction `instruction`. False once Abort()ed (the
  // step must stop). Blocks (without holding the lock) while a FreezeAt matches, until Abort().
  bool Enter(int instruction);
  // Step thread: it now waits for `instruction` (a collective it entered earlier and left to a
  // communication thread, see executor.h) or goes back to the one it entered: reports it as the
  // instruction, since now, without counting an Enter (ordinals stay comparable across
  // processors). No freeze, spin or abort check.
  void WaitsIn(int instruction);

  // Makes every later Enter return false. Idempotent; never undone.
  void Abort();
  bool aborted() const;
  // From now on, Enter(instruction) in step `step` blocks until Abort(); `instruction` -1 means
  // the first instruction that step enters. `step` <= 0 turns it off.
  void FreezeAt(int64_t step, int instruction);
  // From now on, Enter(instruction) in step `step` (-1: the step's first) busy-loops on the CPU
  // for `duration` (or until Abort()) before it returns. `step` <= 0 turns it off.
  void SpinAt(int64_t step, int instruction, absl::Duration duration);

  Snapshot Read() const;

 private:
  // The clock of every time here: CLOCK_MONOTONIC_COARSE, in nanoseconds.
  static int64_t NowNanos();
  // The single writer's side of the seqlock around changes of the fields below.
  uint32_t BeginWrite();
  void EndWrite(uint32_t seq);
  // Waits (Enter's slow path) until Abort().
  void WaitForAbort();
  // Busy-loops (Enter's slow path) for `duration` or until Abort().
  void Spin(absl::Duration duration);
  // The calling thread's CPU clock and its reading in nanoseconds; false when unavailable.
  static bool ThreadCpuClock(clockid_t* clock, int64_t* nanos);

  // Written by the step thread only, between two increments of seq_ (odd while writing).
  std::atomic<uint32_t> seq_{0};
  std::atomic<int64_t> step_{0};
  std::atomic<bool> running_{false};
  std::atomic<int> instruction_{-1};
  std::atomic<int64_t> ordinal_{0};
  std::atomic<int64_t> step_since_{0};         // NowNanos()
  std::atomic<int64_t> instruction_since_{0};  // NowNanos()
  std::atomic<bool> frozen_{false};
  std::atomic<bool> spinning_{false};
  // The step thread's CPU clock and its reading at BeginStep; cpu_known_ false: no clock.
  std::atomic<bool> cpu_known_{false};
  std::atomic<clockid_t> cpu_clock_{0};
  std::atomic<int64_t> cpu_start_{0};

  std::atomic<bool> aborted_{false};
  std::atomic<int64_t> freeze_step_{0};
  std::atomic<int> freeze_instruction_{-1};
  std::atomic<int64_t> spin_step_{0};
  std::atomic<int> spin_instruction_{-1};
  std::atomic<int64_t> spin_nanos_{0};
  absl::Mutex mu_;  // for waiting in WaitForAbort
  bool abort_seen_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_STEP_ACTIVITY_H_
