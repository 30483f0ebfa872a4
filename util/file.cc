#include "util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace meshrt {
namespace {

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Takes errno by value before anything else can change it.
absl::Status SystemError(int err, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, path));
}

absl::Status TooLong(const std::string& path, int64_t max_bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("cannot read ", path, ": longer than its limit of ", max_bytes, " bytes"));
}

// Appends what `fd` holds from the current offset to its end.
absl::Status ReadToEnd(int fd, const std::string& path, int64_t max_bytes, std::string* out) {
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return SystemError(errno, "cannot read ", path);
    if (got == 0) return absl::OkStatus();
    if (static_cast<int64_t>(out->size()) > max_bytes - got) return TooLong(path, max_bytes);
    out->append(buffer, static_cast<size_t>(got));
  }
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) {
  Fd f;
  f.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return SystemError(errno, "cannot open ", path);
  std::string bytes;
  struct stat st;
  // The size is a hint only (0 for /proc files): reserve it, then read to the end.
  if (fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    if (st.st_size > max_bytes) return TooLong(path, max_bytes);
    bytes.reserve(static_cast<size_t>(st.st_size));
  }
  if (absl::Status s = ReadToEnd(f.fd, path, max_bytes, &bytes); !s.ok()) return s;
  return bytes;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view data) {
  const std::string tmp = path + ".tmp";
  {
    Fd f;
    f.fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (f.fd < 0) {
      const int err = errno;
      return SystemError(err, "cannot create ", tmp);
    }
    size_t done = 0;
    while (done < data.size()) {
      ssize_t w = write(f.fd, data.data() + done, data.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        const int err = errno;
        unlink(tmp.c_str());
        return SystemError(err, "cannot write ", tmp);
      }
      done += static_cast<size_t>(w);
    }
    if (fsync(f.fd) != 0) {
      const int err = errno;
      unlink(tmp.c_str());
      return SystemError(err, "cannot fsync ", tmp);
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return SystemError(err, "cannot rename the new file to ", path);
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  Fd d;
  d.fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd >= 0) fsync(d.fd);  // best effort: some filesystems refuse fsync of a directory
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeTempDirectory(absl::string_view prefix) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp", "/", prefix, "-XXXXXX");
  std::string path = pattern;  // mkdtemp fills in the Xs, even when it then fails
  if (::mkdtemp(path.data()) == nullptr) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot create a directory ", pattern));
  }
  return path;
}

}  // namespace meshrt
