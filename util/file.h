// ReadFile: the whole contents of a file, for every caller that reads one into memory (configs,
// tokens, checkpoint shards, .npy files, /proc files). Thread-safe (no shared state).
#ifndef MESHRT_UTIL_FILE_H_
#define MESHRT_UTIL_FILE_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"

namespace meshrt {

// The bytes of `path`, read to its end (so files whose size stat does not know, as in /proc, are
// read whole). Errors carry errno's meaning (NotFound, PermissionDenied, ...) and say
// "cannot open PATH: <system error>" or "cannot read PATH: <system error>"; a file longer than
// `max_bytes` is ResourceExhausted naming the path and the cap.
absl::StatusOr<std::string> ReadFile(
    const std::string& path, int64_t max_bytes = std::numeric_limits<int64_t>::max());

}  // namespace meshrt

#endif  // MESHRT_UTIL_FILE_H_
