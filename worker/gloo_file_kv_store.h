// FileKeyValueStore: a write-once KeyValueStore over files in one directory, so that separate
// processes on one host can rendezvous without a coordinator. For tests and benchmarks: Get polls
// (every millisecond), and nothing is ever removed.
//
// Each key is one file named by the key's hex encoding, written to a temporary name and renamed,
// so a reader never sees half a value. Two processes racing to set one key with different values
// may both succeed (the last rename wins); the callers here never do that. Thread-safe.
#ifndef MESHRT_WORKER_GLOO_FILE_KV_STORE_H_
#define MESHRT_WORKER_GLOO_FILE_KV_STORE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/kv_store.h"

namespace meshrt {

class FileKeyValueStore : public KeyValueStore {
 public:
  // `dir` must exist and be writable.
  explicit FileKeyValueStore(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

 private:
  std::string PathOf(const std::string& key) const;

  const std::string dir_;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_FILE_KV_STORE_H_
