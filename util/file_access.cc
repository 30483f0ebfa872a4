#include "util/file_access.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace meshrt {
namespace {

// realpath(3) into a std::string; errno is kept on failure.
bool RealPath(const std::string& path, std::string* out) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (r == nullptr) return false;
  *out = r;
  ::free(r);
  return true;
}

bool Within(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

}  // namespace

std::string LexicallyNormal(const std::string& path) {
  std::string absolute = path;
  if (path.empty() || path[0] != '/') {
    char cwd[PATH_MAX];
    absolute = absl::StrCat(::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "", "/", path);
  }
  std::vector<std::string> parts;
  for (absl::string_view c : absl::StrSplit(absolute, '/', absl::SkipEmpty())) {
    if (c == ".") continue;
    if (c == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.emplace_back(c);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

const FileAccessPolicy& FileAccessPolicy::AllowAll() {
  static const FileAccessPolicy* const all = [] {
    auto* p = new FileAccessPolicy();
    p->allow_all_ = true;
    return p;
  }();
  return *all;
}

absl::StatusOr<FileAccessPolicy> FileAccessPolicy::Under(const std::vector<std::string>& roots,
                                                         std::string flag) {
  FileAccessPolicy policy;
  policy.flag_ = std::move(flag);
  for (const std::string& root : roots) {
    std::string resolved;
    struct stat st;
    std::string why;
    if (root.empty()) {
      why = "an empty path";
    } else if (!RealPath(root, &resolved) || ::stat(resolved.c_str(), &st) != 0) {
      why = std::strerror(errno);
    } else if (!S_ISDIR(st.st_mode)) {
      why = "not a directory";
    }
    if (!why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          policy.flag_, "=", root, " must name an existing directory (", why, ")"));
    }
    policy.roots_.push_back(std::move(resolved));
  }
  return policy;
}

bool FileAccessPolicy::Contains(const std::string& resolved) const {
  if (allow_all_) return true;
  for (const std::string& root : roots_) {
    if (Within(resolved, root)) return true;
  }
  return false;
}

absl::Status FileAccessPolicy::Refuse(absl::string_view what, const std::string& path,
                                      const std::string& resolved) const {
  const std::string named =
      resolved.empty() || resolved == path
          ? absl::StrCat(what, " '", path, "'")
          : absl::StrCat(what, " '", path, "' (which resolves to '", resolved, "')");
  if (roots_.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        named, " may not be used: this process was started without ", flag_,
        ", so it touches no such path (start it with ", flag_, " DIR naming the directory that "
        "holds it)"));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      named, " lies outside every ", flag_, " directory (", absl::StrJoin(roots_, ", "),
      "): only paths under them are allowed (no '..' or symlink out of them); move it under one "
      "or add its directory with ", flag_));
}

absl::StatusOr<std::string> FileAccessPolicy::Resolve(const std::string& path,
                                                      absl::string_view what) const {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " path is empty"));
  if (!allow_all_ && roots_.empty()) return Refuse(what, path, "");
  std::string resolved;
  if (!RealPath(path, &resolved)) {
    const int err = errno;
    // Whether a path outside the roots exists is none of the caller's business.
    if (!Contains(LexicallyNormal(path))) return Refuse(what, path, "");
    return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", what, " '", path, "'"));
  }
  if (!Contains(resolved)) return Refuse(what, path, resolved);
  return resolved;
}

absl::StatusOr<FileAccessPolicy::OpenedFile> FileAccessPolicy::OpenRegularFile(
    const std::string& path, absl::string_view what) const {
  OpenedFile file;
  absl::StatusOr<std::string> resolved = Resolve(path, what);
  if (!resolved.ok()) return resolved.status();
  file.resolved = *std::move(resolved);
  file.fd = ::open(file.resolved.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (file.fd < 0) {
    const int err = errno;
    if (err == ELOOP) return Refuse(what, path, "");  // the last component became a symlink
    return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", what, " '", path, "'"));
  }
  absl::Status status;
  if (::fstat(file.fd, &file.st) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", what, " '", path, "'"));
  } else if (!S_ISREG(file.st.st_mode)) {
    status = absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "' is not a regular file"));
  } else if (!allow_all_) {
    // What the descriptor really is: a directory on the way may have become a symlink after
    // realpath looked at it. (Without /proc the realpath check above is all there is.)
    std::string opened;
    if (RealPath(absl::StrCat("/proc/self/fd/", file.fd), &opened) && !Contains(opened)) {
      status = Refuse(what, path, opened);
    }
  }
  if (!status.ok()) {
    ::close(file.fd);
    return status;
  }
  return file;
}

}  // namespace meshrt
