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
// it); a gRPC client of the coordinator's store comes later.
#ifndef MESHRT_RUNTIME_KV_STORE_H_
#define MESHRT_RUNTIME_KV_STORE_H_

#include <cstddef>
#include <map>
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

// In-process store: a map guarded by a mutex, with a condition variable for waiting readers
// (every Set of a new key wakes all of them; each rechecks its own key).
// Thread-safe. Abort() releases every waiter, e.g. when a session is torn down.
class InMemoryKeyValueStore : public KeyValueStore {
 public:
  InMemoryKeyValueStore() = default;
  InMemoryKeyValueStore(const InMemoryKeyValueStore&) = delete;
  InMemoryKeyValueStore& operator=(const InMemoryKeyValueStore&) = delete;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

  // Wakes every pending Get with `status` (which must not be OK) and makes every later Set and Get
  // return it. The first abort wins; later ones are ignored.
  void Abort(absl::Status status);

  // Number of keys stored.
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // signalled when a key is added and on Abort
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_KV_STORE_H_
