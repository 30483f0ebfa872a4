#include "coordinator/worker_client.h"

namespace meshrt {

void Cancellation::Cancel() {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [id, fn] : callbacks_) fn();
}

bool Cancellation::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

int Cancellation::Register(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) fn();
  int id = next_id_++;
  callbacks_.emplace(id, std::move(fn));
  return id;
}

void Cancellation::Unregister(int id) {
  absl::MutexLock lock(&mu_);
  callbacks_.erase(id);
}

}  // namespace meshrt
