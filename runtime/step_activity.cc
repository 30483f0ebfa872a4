#include "runtime/step_activity.h"

#include <time.h>

#include <algorithm>

namespace meshrt {

int64_t StepActivity::NowNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
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
  const uint32_t seq = BeginWrite();
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
  return !aborted_.load(std::memory_order_acquire);
}

void StepActivity::WaitForAbort() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&abort_seen_));
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

StepActivity::Snapshot StepActivity::Read() const {
  Snapshot s;
  int64_t step_since = 0, instruction_since = 0;
  while (true) {
    const uint32_t before = seq_.load(std::memory_order_acquire);
    if (before % 2 == 0) {
      s.step = step_.load(std::memory_order_relaxed);
      s.running = running_.load(std::memory_order_relaxed);
      s.instruction = instruction_.load(std::memory_order_relaxed);
      s.ordinal = ordinal_.load(std::memory_order_relaxed);
      s.frozen = frozen_.load(std::memory_order_relaxed);
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
  return s;
}

}  // namespace meshrt
