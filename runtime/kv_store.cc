#include "runtime/kv_store.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "util/logging.h"

namespace meshrt {
namespace {

// A key's first bytes, for messages about keys that may be long.
std::string Head(const std::string& key) { return Abbreviated(key, 200); }

int64_t Charge(const std::string& key, const std::string& value) {
  return static_cast<int64_t>(key.size() + value.size()) +
         InMemoryKeyValueStore::kEntryOverheadBytes;
}

}  // namespace

InMemoryKeyValueStore::InMemoryKeyValueStore(KeyValueStoreOptions options)
    : options_(std::move(options)) {}

std::shared_ptr<InMemoryKeyValueStore::Prefix> InMemoryKeyValueStore::FindPrefixLocked(
    const std::string& key) const {
  // Entries are "<name>/". If "<p>/" is a prefix of `key`, every entry between it and `key` would
  // start with "<p>/" too, i.e. be nested in p, which RegisterPrefix refuses: so the greatest entry
  // <= key is the only candidate.
  auto it = prefixes_.upper_bound(key);
  if (it == prefixes_.begin()) return nullptr;
  --it;
  return absl::StartsWith(key, it->first) ? it->second : nullptr;
}

absl::StatusOr<std::shared_ptr<InMemoryKeyValueStore::Prefix>>
InMemoryKeyValueStore::CheckKeyLocked(const char* what, const std::string& key) const {
  if (key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("KeyValueStore::", what, ": empty key"));
  }
  if (static_cast<int64_t>(key.size()) > options_.max_key_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KeyValueStore::", what, ": key '", Head(key), "' is ", key.size(),
                     " bytes, over the ", options_.max_key_bytes, "-byte limit of a key"));
  }
  std::shared_ptr<Prefix> prefix = FindPrefixLocked(key);
  if (prefix == nullptr && options_.require_prefix) {
    return absl::FailedPreconditionError(absl::StrCat(
        "KeyValueStore::", what, ": key '", Head(key),
        "' is under no live session's prefix; keys go under the kv_prefix of a session (which may "
        "have closed)"));
  }
  return prefix;
}

absl::Status InMemoryKeyValueStore::Set(const std::string& key, const std::string& value) {
  // Size first: an oversized value is refused before any lookup, whatever its key.
  if (static_cast<int64_t>(value.size()) > options_.max_value_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KeyValueStore: the value of key '", Head(key), "' is ", value.size(),
                     " bytes, over the limit of ", options_.max_value_bytes,
                     " bytes of one value (the coordinator's --max_kv_value_bytes)"));
  }
  absl::MutexLock lock(&mu_);
  if (!abort_status_.ok()) return abort_status_;
  absl::StatusOr<std::shared_ptr<Prefix>> prefix = CheckKeyLocked("Set", key);
  if (!prefix.ok()) return prefix.status();
  auto it = values_.find(key);
  if (it != values_.end()) {
    if (it->second == value) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("KeyValueStore: key '", Head(key),
                     "' is already set to a different value; keys are write-once, so use a fresh "
                     "prefix for a new session or epoch"));
  }
  const int64_t charge = Charge(key, value);
  if (Prefix* p = prefix->get(); p != nullptr) {
    if (p->keys + 1 > p->quota.max_keys || p->bytes + charge > p->quota.max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("KeyValueStore: setting key '", Head(key), "' would put ", p->keys + 1,
                       " keys and ", p->bytes + charge, " bytes under session prefix '", p->name,
                       "', over its quota of ", p->quota.max_keys, " keys and ", p->quota.max_bytes,
                       " bytes (the coordinator's --max_kv_keys_per_processor and "
                       "--max_kv_bytes_per_processor, times the session's processors)"));
    }
  }
  if (static_cast<int64_t>(values_.size()) + 1 > options_.max_keys ||
      bytes_ + charge > options_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KeyValueStore: setting key '", Head(key), "' would put ", values_.size() + 1, " keys and ",
        bytes_ + charge, " bytes in the store, over its limit of ", options_.max_keys, " keys and ",
        options_.max_bytes,
        " bytes (the coordinator's --max_kv_keys and --max_kv_bytes); close sessions or raise "
        "them"));
  }
  values_.emplace(key, value);
  bytes_ += charge;
  if (Prefix* p = prefix->get(); p != nullptr) {
    ++p->keys;
    p->bytes += charge;
  }
  cv_.SignalAll();
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKeyValueStore::Get(const std::string& key,
                                                       absl::Duration timeout) {
  if (timeout > options_.max_wait) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KeyValueStore::Get of '", Head(key), "': a wait (KvGet timeout_ms) of ",
        absl::FormatDuration(timeout), " is over the limit of ",
        absl::FormatDuration(options_.max_wait)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  if (!abort_status_.ok()) return abort_status_;
  absl::StatusOr<std::shared_ptr<Prefix>> prefix = CheckKeyLocked("Get", key);
  if (!prefix.ok()) return prefix.status();
  const Prefix* p = prefix->get();
  // WaitWithDeadline returns true once the deadline has passed; spurious wakeups loop.
  while (abort_status_.ok() && (p == nullptr || !p->deleted) && values_.count(key) == 0) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (!abort_status_.ok()) return abort_status_;
  if (p != nullptr && p->deleted) {
    return absl::AbortedError(absl::StrCat("KeyValueStore: session prefix '", p->name,
                                           "' was deleted (its session closed or failed) while "
                                           "waiting for key '",
                                           Head(key), "'"));
  }
  auto it = values_.find(key);
  if (it == values_.end()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "KeyValueStore: key '", Head(key), "' was not set within ", absl::FormatDuration(timeout)));
  }
  return it->second;
}

absl::Status InMemoryKeyValueStore::RegisterPrefix(const std::string& prefix, KeyValueQuota quota) {
  if (prefix.empty() || prefix.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("KeyValueStore: prefix '", Head(prefix),
                                                   "' must be non-empty and not end in '/'"));
  }
  if (quota.max_keys < 0 || quota.max_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KeyValueStore: prefix '", Head(prefix), "' has a negative quota"));
  }
  const std::string entry = prefix + "/";
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Prefix> around = FindPrefixLocked(entry);
  auto inside = prefixes_.lower_bound(entry);
  const Prefix* clash = around != nullptr ? around.get()
                        : inside != prefixes_.end() && absl::StartsWith(inside->first, entry)
                            ? inside->second.get()
                            : nullptr;
  if (clash != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("KeyValueStore: prefix '", Head(prefix), "' ",
                     clash->name == prefix
                         ? "is registered already"
                         : absl::StrCat("overlaps registered prefix '", Head(clash->name), "'")));
  }
  auto p = std::make_shared<Prefix>();
  p->name = prefix;
  p->quota = quota;
  const auto first = values_.lower_bound(entry);
  for (auto it = first; it != values_.end() && absl::StartsWith(it->first, entry); ++it) {
    ++p->keys;  // keys set before the registration (only without require_prefix) count too
    p->bytes += Charge(it->first, it->second);
  }
  prefixes_.emplace(entry, std::move(p));
  return absl::OkStatus();
}

int64_t InMemoryKeyValueStore::DeletePrefix(const std::string& prefix) {
  const std::string entry = prefix + "/";
  absl::MutexLock lock(&mu_);
  int64_t removed = 0;
  auto it = values_.lower_bound(entry);
  while (it != values_.end() && absl::StartsWith(it->first, entry)) {
    bytes_ -= Charge(it->first, it->second);
    it = values_.erase(it);
    ++removed;
  }
  auto p = prefixes_.find(entry);
  if (p != prefixes_.end()) {
    p->second->deleted = true;
    prefixes_.erase(p);
  }
  cv_.SignalAll();
  return removed;
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

int64_t InMemoryKeyValueStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace meshrt
