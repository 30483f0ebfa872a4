#include "runtime/step_activity.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>

namespace meshrt {

int64_t StepActivity::NowNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool StepActivity::ThreadCpuClock(clockid_t* clock, int64_t* nanos) {
  struct timespec ts;
  if (pthread_getcpuclockid(pthread_self(), clock) != 0 || clock_gettime(*clock, &ts) != 0) {
    return false;
  }
  *nanos = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  return true;
}

StepActivity::StepActivity() {
  const int64_t now = NowNanos();
  step_since_.store(now, std::memory_order_relaxed);
  instruction_since_.store(now, std::memory_order_relaxed);
}

// The writer's side of the seqlock: seq_ is odd while the fields change.
uint32_t StepActivity::BeginWrite() {
  const uint32_t seq = seq_.load(std::memory_order_relaxed);
  seq_.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  return seq;
}

void StepActivity::EndWrite(uint32_t seq) { seq_.store(seq + 2, std::memory_order_release); }

void StepActivity::BeginStep(int64_t step) {
  const int64_t now = NowNanos();
  clockid_t clock = 0;
  int64_t cpu = 0;
  const bool cpu_known = ThreadCpuClock(&clock, &cpu);
  const uint32_t seq = BeginWrite();
  cpu_known_.store(cpu_known, std::memory_order_relaxed);
  cpu_clock_.store(clock, std::memory_order_relaxed);
  cpu_start_.store(cpu, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  running_.store(true, std::memory_order_relaxed);
  instruction_.store(-1, std::memory_order_relaxed);
  ordinal_.store(0, std::memory_order_relaxed);
  step_since_.store(now, std::memory_order_relaxed);
  instruction_since_.store(now, std::memory_order_relaxed);
  EndWrite(seq);
}

void StepActivity::EndStep() {
  const int64_t now = NowNanos();
  const uint32_t seq = BeginWrite();
  running_.store(false, std::memory_order_relaxed);
  step_since_.store(now, std::memory_order_relaxed);
  instruction_since_.store(now, std::memory_order_relaxed);
  EndWrite(seq);
}

bool StepActivity::Enter(int instruction) {
  const int64_t now = NowNanos();
  // Only this thread writes ordinal_ and step_: relaxed loads of them are exact.
  const int64_t ordinal = ordinal_.load(std::memory_order_relaxed) + 1;
  const uint32_t seq = BeginWrite();
  instruction_.store(instruction, std::memory_order_relaxed);
  instruction_since_.store(now, std::memory_order_relaxed);
  ordinal_.store(ordinal, std::memory_order_relaxed);
  EndWrite(seq);
  const int64_t freeze_step = freeze_step_.load(std::memory_order_relaxed);
  if (freeze_step > 0 && freeze_step == step_.load(std::memory_order_relaxed)) {
    const int freeze_instruction = freeze_instruction_.load(std::memory_order_relaxed);
    if (freeze_instruction == instruction || (freeze_instruction < 0 && ordinal == 1)) {
      uint32_t frozen_seq = BeginWrite();
      frozen_.store(true, std::memory_order_relaxed);
      EndWrite(frozen_seq);
      WaitForAbort();
      frozen_seq = BeginWrite();
      frozen_.store(false, std::memory_order_relaxed);
      EndWrite(frozen_seq);
    }
  }
  const int64_t spin_step = spin_step_.load(std::memory_order_relaxed);
  if (spin_step > 0 && spin_step == step_.load(std::memory_order_relaxed)) {
    const int spin_instruction = spin_instruction_.load(std::memory_order_relaxed);
    if (spin_instruction == instruction || (spin_instruction < 0 && ordinal == 1)) {
      uint32_t spin_seq = BeginWrite();
      spinning_.store(true, std::memory_order_relaxed);
      EndWrite(spin_seq);
      Spin(absl::Nanoseconds(spin_nanos_.load(std::memory_order_relaxed)));
      spin_seq = BeginWrite();
      spinning_.store(false, std::memory_order_relaxed);
      EndWrite(spin_seq);
    }
  }
  return !aborted_.load(std::memory_order_acquire);
}

void StepActivity::WaitsIn(int instruction) {
  const int64_t now = NowNanos();
  const uint32_t seq = BeginWrite();
  instruction_.store(instruction, std::memory_order_relaxed);
  instruction_since_.store(now, std::memory_order_relaxed);
  EndWrite(seq);
}

void StepActivity::WaitForAbort() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&abort_seen_));
}

void StepActivity::Spin(absl::Duration duration) {
  // Work the compiler cannot drop, checking the (vDSO, user-space) clock and Abort now and then:
  // the thread stays on the CPU the whole time, as in a long kernel.
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t start = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  const int64_t end = start + absl::ToInt64Nanoseconds(duration);
  volatile uint64_t sink = 0;
  for (uint64_t i = 0; !aborted_.load(std::memory_order_relaxed); ++i) {
    sink = sink * 6364136223846793005u + i;
    if (i % 4096 != 0) continue;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec >= end) break;
  }
}

void StepActivity::Abort() {
  aborted_.store(true, std::memory_order_release);
  absl::MutexLock lock(&mu_);
  abort_seen_ = true;
}

bool StepActivity::aborted() const { return aborted_.load(std::memory_order_acquire); }

void StepActivity::FreezeAt(int64_t step, int instruction) {
  freeze_instruction_.store(instruction, std::memory_order_relaxed);
  freeze_step_.store(step, std::memory_order_relaxed);
}

void StepActivity::SpinAt(int64_t step, int instruction, absl::Duration duration) {
  spin_instruction_.store(instruction, std::memory_order_relaxed);
  spin_nanos_.store(absl::ToInt64Nanoseconds(duration), std::memory_order_relaxed);
  spin_step_.store(step, std::memory_order_relaxed);
}

StepActivity::Snapshot StepActivity::Read() const {
  Snapshot s;
  int64_t step_since = 0, instruction_since = 0;
  bool cpu_known = false;
  clockid_t cpu_clock = 0;
  int64_t cpu_start = 0;
  while (true) {
    const uint32_t before = seq_.load(std::memory_order_acquire);
    if (before % 2 == 0) {
      s.step = step_.load(std::memory_order_relaxed);
      s.running = running_.load(std::memory_order_relaxed);
      s.instruction = instruction_.load(std::memory_order_relaxed);
      s.ordinal = ordinal_.load(std::memory_order_relaxed);
      s.frozen = frozen_.load(std::memory_order_relaxed);
      s.spinning = spinning_.load(std::memory_order_relaxed);
      cpu_known = cpu_known_.load(std::memory_order_relaxed);
      cpu_clock = cpu_clock_.load(std::memory_order_relaxed);
      cpu_start = cpu_start_.load(std::memory_order_relaxed);
      step_since = step_since_.load(std::memory_order_relaxed);
      instruction_since = instruction_since_.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == before) break;
    }
    // The writer is mid-update (a few stores): retry.
  }
  const int64_t now = NowNanos();
  s.in_step = absl::Nanoseconds(std::max<int64_t>(0, now - step_since));
  s.in_instruction = absl::Nanoseconds(std::max<int64_t>(0, now - instruction_since));
  s.aborted = aborted();
  struct timespec ts;
  // The pair (clock, reading at BeginStep) was read consistently above. The step thread may have
  // ended the step since (the reading then runs a little past it: harmless) or even exited
  // (clock_gettime fails with EINVAL: unknown). A reading below the start (the thread's id reused
  // by a new thread) is unknown too.
  if (s.running && cpu_known && clock_gettime(cpu_clock, &ts) == 0) {
    const int64_t cpu = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    if (cpu >= cpu_start) s.step_cpu = absl::Nanoseconds(cpu - cpu_start);
  }
  return s;
}

}  // namespace meshrt
