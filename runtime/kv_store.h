// KeyValueStore: the small write-once key-value store that Gloo rendezvous (and anything else that
// needs to meet its peers) goes through.
//
// Semantics shared by every implementation:
//   - Keys are write-once. Setting a key that already holds the *same* value is OK (so a retried
//     Set is harmless); setting it to a different value is AlreadyExists naming the key. Start a
//     new session or epoch under a fresh key prefix instead of overwriting.
//   - Get blocks until the key exists, then returns its value. After `timeout` it returns
//     DeadlineExceeded naming the key and the timeout.
//   - Empty keys are InvalidArgument.
//
// Implementations: InMemoryKeyValueStore below (tests, and the coordinator serves its KV RPCs from
// it); GrpcCoordinatorClient (worker/coordinator_client.h), the workers' client of the
// coordinator's store; FileKeyValueStore (worker/gloo_file_kv_store.h), files in one directory, for
// tests and benchmarks.
#ifndef MESHRT_RUNTIME_KV_STORE_H_
#define MESHRT_RUNTIME_KV_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace meshrt {

// Interface. Implementations must be thread-safe: any number of threads may call Set and Get at
// once, and a Set wakes every Get waiting for that key.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  // Stores `value` under `key`. Errors: InvalidArgument (empty key), AlreadyExists (the key holds
  // a different value), or the implementation's transport/abort status.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;

  // Waits up to `timeout` for `key` to exist and returns its value. Errors: InvalidArgument (empty
  // key), DeadlineExceeded (the key did not appear in time), or the implementation's
  // transport/abort status. A non-positive timeout still returns a value that already exists.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
};

// Caps of a whole InMemoryKeyValueStore. Every byte count charges a key its key bytes, its value
// bytes and kEntryOverheadBytes (the map's own cost), so many tiny keys are bounded too. The
// defaults hold Gloo's rendezvous of a 4096-processor mesh, which stores ~170 bytes per pair of
// processors in a full-mesh group (the coordinator's --max_kv_* flags set them).
struct KeyValueStoreOptions {
  // Longest key.
  int64_t max_key_bytes = 16 << 10;
  // Largest value (a Gloo rank's address list for a 4096-member group is ~560 KB).
  int64_t max_value_bytes = 4 << 20;
  // Keys in the whole store.
  int64_t max_keys = int64_t{1} << 22;
  // Bytes in the whole store.
  int64_t max_bytes = int64_t{4} << 30;
  // When true, Set and Get accept only keys under a registered prefix (see RegisterPrefix): the
  // coordinator's mode, where every key belongs to a live session. When false, other keys are
  // stored under the whole-store caps only.
  bool require_prefix = false;
  // Longest wait of one Get: a waiting Get holds a thread (of the coordinator's RPC server), so
  // it is bounded like every wait. Gloo asks for its collective timeout, seconds to minutes.
  absl::Duration max_wait = absl::Minutes(10);
};

// What the keys under one registered prefix may hold together (counted as in
// KeyValueStoreOptions).
struct KeyValueQuota {
  int64_t max_keys = 0;
  int64_t max_bytes = 0;
};

// In-process store: a map guarded by a mutex, with a condition variable for waiting readers
// (every Set of a new key wakes all of them; each rechecks its own key).
//
// Prefixes: RegisterPrefix(p, quota) makes "p/..." a quota'd namespace (the coordinator registers
// each session's kv_prefix); DeletePrefix(p) drops every key under it and wakes the Gets waiting
// for one. Registered prefixes never nest (neither is "q/..." of the other).
//
// Errors beyond the interface's: ResourceExhausted for a key, value, prefix quota or store cap
// that would be exceeded (naming the key, the prefix or cap, and the flag that raises it);
// FailedPrecondition for a key under no registered prefix when require_prefix is set; Aborted for
// a Get whose prefix is deleted while it waits.
//
// Thread-safe. Abort() releases every waiter, e.g. when a session is torn down.
class InMemoryKeyValueStore : public KeyValueStore {
 public:
  // Bytes every key is charged beyond its key and value bytes.
  static constexpr int64_t kEntryOverheadBytes = 64;

  explicit InMemoryKeyValueStore(KeyValueStoreOptions options = {});
  InMemoryKeyValueStore(const InMemoryKeyValueStore&) = delete;
  InMemoryKeyValueStore& operator=(const InMemoryKeyValueStore&) = delete;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

  // Registers `prefix` (non-empty, without a trailing '/') with `quota`. Keys "<prefix>/..." then
  // count against it. Errors: InvalidArgument (empty, trailing '/', a quota below 0),
  // AlreadyExists (registered already, or nested in / around a registered prefix; names both).
  absl::Status RegisterPrefix(const std::string& prefix, KeyValueQuota quota);
  // Removes every key "<prefix>/..." and the prefix's registration (if any); Gets waiting for one
  // of its keys return Aborted naming the prefix. Returns how many keys were removed.
  int64_t DeletePrefix(const std::string& prefix);

  // Wakes every pending Get with `status` (which must not be OK) and makes every later Set and Get
  // return it. The first abort wins; later ones are ignored.
  void Abort(absl::Status status);

  // Number of keys stored.
  size_t size() const;
  // Bytes charged for every key stored (see KeyValueStoreOptions).
  int64_t bytes() const;

 private:
  // Usage of one registered prefix. Shared with the Gets waiting on one of its keys, which see
  // `deleted` once DeletePrefix ran.
  struct Prefix {
    std::string name;  // without the trailing '/'
    KeyValueQuota quota;
    int64_t keys = 0;
    int64_t bytes = 0;
    bool deleted = false;
  };

  // The registered prefix `key` is under, or null.
  std::shared_ptr<Prefix> FindPrefixLocked(const std::string& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The registered prefix of `key`, null when there is none and that is allowed, or the error of a
  // key that is too long or under no prefix in require_prefix mode.
  absl::StatusOr<std::shared_ptr<Prefix>> CheckKeyLocked(const char* what,
                                                         const std::string& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const KeyValueStoreOptions options_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // signalled when a key is added, on DeletePrefix and on Abort
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // By name + "/": then the registered prefix of a key, if any, is the greatest entry <= the key.
  std::map<std::string, std::shared_ptr<Prefix>> prefixes_ ABSL_GUARDED_BY(mu_);
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_KV_STORE_H_
