// Whole-file reads and writes for the CLI's files (.npy, .npz, graphs). Thread-safe.
#ifndef MESHRT_CLIENT_FILE_BYTES_H_
#define MESHRT_CLIENT_FILE_BYTES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {

// The whole contents of `path`. Errors keep errno's meaning (NotFound, ...) and name the path,
// after `what` when given ("cannot open graph file x.pb").
absl::StatusOr<std::string> ReadFileBytes(const std::string& path, absl::string_view what = "");

// Writes `bytes` to `path` (replacing it). Errors name the path and the system error.
absl::Status WriteFileBytes(const std::string& path, absl::string_view bytes);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_FILE_BYTES_H_
