#include "runtime/kv_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/logging.h"

namespace meshrt {

absl::Status InMemoryKeyValueStore::Set(const std::string& key, const std::string& value) {
  if (key.empty()) return absl::InvalidArgumentError("KeyValueStore::Set: empty key");
  absl::MutexLock lock(&mu_);
  if (!abort_status_.ok()) return abort_status_;
  auto [it, inserted] = values_.emplace(key, value);
  if (inserted) {
    cv_.SignalAll();
  } else if (it->second != value) {
    return absl::AlreadyExistsError(
        absl::StrCat("KeyValueStore: key '", key,
                     "' is already set to a different value; keys are write-once, so use a fresh "
                     "prefix for a new session or epoch"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKeyValueStore::Get(const std::string& key,
                                                       absl::Duration timeout) {
  if (key.empty()) return absl::InvalidArgumentError("KeyValueStore::Get: empty key");
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  // WaitWithDeadline returns true once the deadline has passed; spurious wakeups loop.
  while (abort_status_.ok() && values_.count(key) == 0) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (!abort_status_.ok()) return abort_status_;
  auto it = values_.find(key);
  if (it == values_.end()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "KeyValueStore: key '", key, "' was not set within ", absl::FormatDuration(timeout)));
  }
  return it->second;
}

void InMemoryKeyValueStore::Abort(absl::Status status) {
  MESHRT_CHECK(!status.ok(), "InMemoryKeyValueStore::Abort needs an error status");
  absl::MutexLock lock(&mu_);
  if (!abort_status_.ok()) return;
  abort_status_ = std::move(status);
  cv_.SignalAll();
}

size_t InMemoryKeyValueStore::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

}  // namespace meshrt
