#include "runtime/step_activity.h"

namespace meshrt {

void StepActivity::BeginStep(int64_t step) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  step_ = step;
  running_ = true;
  instruction_ = -1;
  ordinal_ = 0;
  step_since_ = instruction_since_ = now;
}

void StepActivity::EndStep() {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  running_ = false;
  step_since_ = instruction_since_ = now;
}

bool StepActivity::Enter(int instruction) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  instruction_ = instruction;
  instruction_since_ = now;
  ++ordinal_;
  if (freeze_step_ > 0 && freeze_step_ == step_ && !aborted_ &&
      (freeze_instruction_ == instruction || (freeze_instruction_ < 0 && ordinal_ == 1))) {
    frozen_ = true;
    mu_.Await(absl::Condition(&aborted_));  // releases mu_ while waiting: Read() still answers
    frozen_ = false;
  }
  return !aborted_;
}

void StepActivity::Abort() {
  absl::MutexLock lock(&mu_);
  aborted_ = true;
}

bool StepActivity::aborted() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

void StepActivity::FreezeAt(int64_t step, int instruction) {
  absl::MutexLock lock(&mu_);
  freeze_step_ = step;
  freeze_instruction_ = instruction;
}

StepActivity::Snapshot StepActivity::Read() const {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  Snapshot s;
  s.step = step_;
  s.running = running_;
  s.instruction = instruction_;
  s.ordinal = ordinal_;
  s.in_step = now - step_since_;
  s.in_instruction = now - instruction_since_;
  s.frozen = frozen_;
  s.aborted = aborted_;
  return s;
}

}  // namespace meshrt
