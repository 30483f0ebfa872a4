#include "client/file_bytes.h"

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "util/file.h"

namespace meshrt {

absl::StatusOr<std::string> ReadFileBytes(const std::string& path, absl::string_view what) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (bytes.ok() || what.empty()) return bytes;
  // "cannot open x.pb: ..." -> "cannot open graph file x.pb: ...".
  std::string message(bytes.status().message());
  const size_t at = message.find(path);
  if (at != std::string::npos) message.insert(at, absl::StrCat(what, " "));
  return absl::Status(bytes.status().code(), message);
}

absl::Status WriteFileBytes(const std::string& path, absl::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot write ", path));
  }
  const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int write_err = errno;
  const bool closed = std::fclose(f) == 0;  // flushes; a full disk may show only here
  if (!wrote || !closed) {
    return absl::ErrnoToStatus(wrote ? errno : write_err, absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace meshrt
