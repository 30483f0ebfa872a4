#include "text/vocab/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace meshrt {
namespace text {
namespace {

absl::Status ErrnoStatus(int error, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EISDIR:
      return absl::InvalidArgumentError(message);
    default:
      return absl::UnknownError(message);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  // fopen of a directory succeeds; reading it fails with EISDIR, reported by Next.
  return std::unique_ptr<LineReader>(new LineReader(path, file));
}

LineReader::~LineReader() { std::fclose(file_); }

bool LineReader::Next(std::string* line) {
  if (!status_.ok()) return false;
  line->clear();
  bool any = false;
  int c;
  while ((c = getc_unlocked(file_)) != EOF) {
    any = true;
    if (c == '\n') break;
    line->push_back(static_cast<char>(c));
  }
  if (std::ferror(file_)) {
    status_ =
        ErrnoStatus(errno, absl::StrCat("cannot read ", path_, " (line ", line_number_ + 1, ")"));
    return false;
  }
  if (!any) return false;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  ++line_number_;
  return true;
}

bool IsValidUtf8(absl::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      *bad_offset = i;
      return false;
    }
    if (i + len > n) {
      *bad_offset = i;
      return false;
    }
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) {
        *bad_offset = i;
        return false;
      }
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  // A name of our own rather than mkstemp's, so the file gets the umask's usual mode (mkstemp
  // makes it 0600): the pid and a per-process counter, retried past leftovers of a dead process.
  static std::atomic<uint64_t> counter{0};
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = absl::StrCat(path, ".tmp-", getpid(), "-", counter.fetch_add(1));
    fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create ", path));
  std::FILE* file = fdopen(fd, "wb");
  if (file == nullptr) {
    const int error = errno;
    close(fd);
    unlink(temp.c_str());
    return ErrnoStatus(error, absl::StrCat("cannot create ", path));
  }
  return std::unique_ptr<AtomicFile>(new AtomicFile(path, std::move(temp), file));
}

AtomicFile::~AtomicFile() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_) unlink(temp_path_.c_str());
}

absl::Status AtomicFile::Write(absl::string_view bytes) {
  if (!status_.ok()) return status_;
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    status_ = ErrnoStatus(errno, absl::StrCat("cannot write ", path_));
  }
  return status_;
}

absl::Status AtomicFile::Commit() {
  if (!status_.ok()) return status_;
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) {
    status_ = ErrnoStatus(errno, absl::StrCat("cannot write ", path_));
    return status_;
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    status_ = ErrnoStatus(errno, absl::StrCat("cannot rename ", temp_path_, " to ", path_));
    return status_;
  }
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace text
}  // namespace meshrt
