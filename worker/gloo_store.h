// GlooStore: a gloo::rendezvous::Store backed by a borrowed KeyValueStore (runtime/kv_store.h), so
// Gloo's rendezvous goes through the coordinator's KV store (or an in-memory one in tests).
//
// Gloo expects its store to throw on failure. Every failing call throws KeyValueStoreError, a
// gloo::IoException that also carries the KeyValueStore's absl::Status, so the one place that
// catches Gloo's exceptions (GlooCommunicator) can keep the original status code. These
// exceptions never leave Gloo's call into the store except through that catch.
//
// Timeouts: `get` and the one-argument `wait` wait up to the timeout given at construction; the
// two-argument `wait` uses its argument (or the construction timeout when it is zero, which Gloo
// means as "no timeout"). Nothing waits forever.
//
// Ownership and thread-safety: borrows `store`, which must outlive this object. Holds no mutable
// state, so it is as thread-safe as `store` (every KeyValueStore is).
#ifndef MESHRT_WORKER_GLOO_STORE_H_
#define MESHRT_WORKER_GLOO_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/store.h"
#include "runtime/kv_store.h"

namespace meshrt {

// What GlooStore throws: Gloo sees an IoException with our message; GlooCommunicator recovers the
// status.
class KeyValueStoreError : public gloo::IoException {
 public:
  explicit KeyValueStoreError(absl::Status status);
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

class GlooStore : public gloo::rendezvous::Store {
 public:
  // `store` is borrowed and must not be null; `timeout` must be positive.
  GlooStore(KeyValueStore* store, absl::Duration timeout);

  // Throws KeyValueStoreError (e.g. AlreadyExists when `key` holds other bytes).
  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until `key` exists (up to the construction timeout). Throws KeyValueStoreError.
  std::vector<char> get(const std::string& key) override;
  // Block until every key exists, within one overall deadline. Throw KeyValueStoreError
  // (DeadlineExceeded naming the first missing key).
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  KeyValueStore* const store_;
  const absl::Duration timeout_;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_STORE_H_
