#include "worker/gloo_store.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "util/logging.h"

namespace meshrt {

KeyValueStoreError::KeyValueStoreError(absl::Status status)
    : gloo::IoException(status.ToString()), status_(std::move(status)) {}

GlooStore::GlooStore(KeyValueStore* store, absl::Duration timeout)
    : store_(store), timeout_(timeout) {
  MESHRT_CHECK(store != nullptr, "GlooStore needs a KeyValueStore");
  MESHRT_CHECK(timeout > absl::ZeroDuration(), "GlooStore needs a positive timeout");
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_->Set(key, std::string(data.begin(), data.end()));
  if (!status.ok()) throw KeyValueStoreError(std::move(status));
}

std::vector<char> GlooStore::get(const std::string& key) {
  absl::StatusOr<std::string> value = store_->Get(key, timeout_);
  if (!value.ok()) throw KeyValueStoreError(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout_)));
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  const absl::Duration limit = timeout.count() > 0 ? absl::Milliseconds(timeout.count()) : timeout_;
  const absl::Time deadline = absl::Now() + limit;
  for (const std::string& key : keys) {
    // One deadline for all keys; a key that already exists returns at once even past it.
    absl::StatusOr<std::string> value = store_->Get(key, deadline - absl::Now());
    if (!value.ok()) throw KeyValueStoreError(value.status());
  }
}

}  // namespace meshrt
