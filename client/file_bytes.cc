#include "client/file_bytes.h"

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace meshrt {

absl::StatusOr<std::string> ReadFileBytes(const std::string& path, absl::string_view what) {
  const std::string named = what.empty() ? path : absl::StrCat(what, " ", path);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot open ", named));
  }
  std::string bytes;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) bytes.append(buffer, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", named));
  return bytes;
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
