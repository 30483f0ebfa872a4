// ReadFile and WriteFileAtomically: a whole file in or out, for every caller that reads one into
// memory (configs, tokens, checkpoint shards, .npy files, /proc files) or replaces one (manifests,
// profiles, corpus splits, vocabularies). Thread-safe (no shared state).
#ifndef MESHRT_UTIL_FILE_H_
#define MESHRT_UTIL_FILE_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {

// The bytes of `path`, read to its end (so files whose size stat does not know, as in /proc, are
// read whole). Errors carry errno's meaning (NotFound, PermissionDenied, ...) and say
// "cannot open PATH: <system error>" or "cannot read PATH: <system error>"; a file longer than
// `max_bytes` is ResourceExhausted naming the path and the cap.
absl::StatusOr<std::string> ReadFile(
    const std::string& path, int64_t max_bytes = std::numeric_limits<int64_t>::max());

// Writes `data` to `path` atomically: `path`.tmp in the same directory (opened O_NOFOLLOW, so never
// through a symlink planted there), fsync, rename over `path`, then a best-effort fsync of the
// directory. A reader sees the old file or the new one, never a part. Errors keep errno's meaning
// (NotFound for a missing directory, ...) and name the file.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view data);

// A new directory `<prefix>-XXXXXX` (mode 0700, a unique suffix) under $TMPDIR, else /tmp, and its
// path. Errors keep errno's meaning and name the pattern.
absl::StatusOr<std::string> MakeTempDirectory(absl::string_view prefix);

}  // namespace meshrt

#endif  // MESHRT_UTIL_FILE_H_
