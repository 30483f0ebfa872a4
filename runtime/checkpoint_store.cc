#include "runtime/checkpoint_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "runtime/checkpoint.h"
#include "util/file.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

std::string Join(const std::string& dir, absl::string_view name) {
  return absl::StrCat(dir, "/", name);
}

// The files a save writes into a version directory: the only ones a cleanup removes.
bool IsMeshrtVersionFile(absl::string_view name) {
  return name == kCheckpointManifestFile ||
         name == absl::StrCat(kCheckpointManifestFile, ".tmp") ||
         absl::EndsWith(name, ".shard") || absl::EndsWith(name, ".shard.tmp");
}

// Removes meshrt's regular files from version directory `dir`, then the directory if it is empty.
void RemoveVersionFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const std::string& name : names) {
    struct stat st;
    const std::string path = Join(dir, name);
    if (IsMeshrtVersionFile(name) && ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      ::unlink(path.c_str());
    }
  }
  ::rmdir(dir.c_str());  // fails, leaving it, when anything else is in it
}

// CURRENT's version: "" when there is no CURRENT.
absl::StatusOr<std::string> ReadCurrent(const std::string& checkpoint_dir) {
  const std::string path = Join(checkpoint_dir, kCheckpointCurrentFile);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return std::string();
    return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", path));
  }
  char buf[128];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0) return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", path));
  const std::string version(absl::StripAsciiWhitespace(absl::string_view(buf, n)));
  if (!IsCheckpointVersionName(version)) {
    return absl::DataLossError(absl::StrCat(
        path, " does not name a checkpoint version (v-<step>-<16 hex digits>): it is corrupted"));
  }
  return version;
}

// The step a version name carries ("v-0000000120-..." -> 120).
int64_t VersionStep(absl::string_view version) {
  int64_t step = 0;
  for (size_t i = 2; i < version.size() && absl::ascii_isdigit(version[i]); ++i) {
    step = step * 10 + (version[i] - '0');
  }
  return step;
}

bool HasManifest(const std::string& version_dir) {
  struct stat st;
  return ::lstat(Join(version_dir, kCheckpointManifestFile).c_str(), &st) == 0 &&
         S_ISREG(st.st_mode);
}

// The names of the version directories (not symlinks) in `checkpoint_dir`.
std::vector<std::string> VersionDirectories(const std::string& checkpoint_dir) {
  std::vector<std::string> versions;
  DIR* d = ::opendir(checkpoint_dir.c_str());
  if (d == nullptr) return versions;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    struct stat st;
    if (IsCheckpointVersionName(name) &&
        ::lstat(Join(checkpoint_dir, name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      versions.push_back(name);
    }
  }
  ::closedir(d);
  return versions;
}

// Of `versions` (in `checkpoint_dir`), those other than `except` that hold a manifest (a save
// that got as far as its commit), newest step first.
std::vector<std::string> CompleteVersions(const std::string& checkpoint_dir,
                                          const std::vector<std::string>& versions,
                                          const std::vector<std::string>& except) {
  std::vector<std::string> complete;
  for (const std::string& name : versions) {
    if (std::find(except.begin(), except.end(), name) == except.end() &&
        HasManifest(Join(checkpoint_dir, name))) {
      complete.push_back(name);
    }
  }
  std::sort(complete.begin(), complete.end(), [](const std::string& a, const std::string& b) {
    const int64_t sa = VersionStep(a), sb = VersionStep(b);
    return sa != sb ? sa > sb : a > b;
  });
  return complete;
}

}  // namespace

absl::StatusOr<CheckpointRoot> CheckpointRoot::Open(const std::string& root,
                                                    const std::string& flag) {
  if (root.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoints are disabled: no ", flag, " was given (start the coordinator, and every "
        "worker, with ", flag, " DIR: the directory on the shared filesystem that checkpoints are "
        "saved under)"));
  }
  ASSIGN_OR_RETURN(FileAccessPolicy policy, FileAccessPolicy::Under({root}, flag));
  return CheckpointRoot(std::move(policy));
}

absl::StatusOr<std::string> CheckpointRoot::Resolve(const std::string& name, bool create) const {
  const std::string& flag = policy_.flag();
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint name '", name, "' ", why, ": name a checkpoint relative to the coordinator's ",
        flag, " (", path(), "), e.g. 'ck' or 'runs/ck'"));
  };
  if (name.empty()) return invalid("is empty");
  if (name[0] == '/') return invalid("is an absolute path");
  if (name.find('\0') != std::string::npos) return invalid("contains a NUL byte");
  const std::vector<std::string> parts = absl::StrSplit(name, '/');
  for (const std::string& part : parts) {
    if (part == "..") return invalid("may not contain '..'");
    if (part.empty() || part == ".") return invalid("has an empty or '.' component");
  }
  std::string dir = path();
  for (const std::string& part : parts) {
    const std::string next = Join(dir, part);
    if (create && ::mkdir(next.c_str(), 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      return absl::ErrnoToStatus(err, absl::StrCat("cannot create checkpoint directory ", next));
    }
    absl::StatusOr<std::string> resolved =
        policy_.Resolve(next, absl::StrCat("checkpoint '", name, "': directory"));
    if (resolved.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat("there is no checkpoint '", name, "' under ", flag,
                                              " ", path(), " (", next, " does not exist)"));
    }
    if (!resolved.ok()) return resolved.status();
    struct stat st;
    if (::stat(resolved->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint '", name, "': ", next, " is not a directory"));
    }
    dir = *std::move(resolved);
  }
  return dir;
}

bool IsCheckpointVersionName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "v-")) return false;
  const size_t dash = name.find('-');
  if (dash == 0 || dash == absl::string_view::npos || name.size() - dash - 1 != 16) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = i < dash ? absl::ascii_isdigit(c)
                             : i == dash || absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<CheckpointWriter> CheckpointWriter::Begin(const std::string& checkpoint_dir,
                                                         int64_t step, int keep) {
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("a checkpoint of step ", step, " (negative)"));
  }
  if (keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a save must keep at least 1 checkpoint version, not ", keep));
  }
  CheckpointWriter w;
  w.keep_ = keep;
  w.checkpoint_dir_ = checkpoint_dir;
  const std::string lock = Join(checkpoint_dir, kCheckpointLockFile);
  w.lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (w.lock_fd_ < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot open ", lock));
  }
  if (::flock(w.lock_fd_, LOCK_EX | LOCK_NB) == 0) {
    w.locked_ = true;
  } else if (errno == EWOULDBLOCK) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another save into checkpoint ", checkpoint_dir, " is in progress (it holds ", lock,
        "); save again when it has finished, or under another name"));
  } else {
    LogWarning("checkpoint: cannot lock ", lock, " (", std::strerror(errno),
               "): saving without a lock, and keeping every older version");
  }
  ASSIGN_OR_RETURN(w.previous_, ReadCurrent(checkpoint_dir));
  std::random_device random;
  for (int attempt = 0; attempt < 8 && w.version_.empty(); ++attempt) {
    const uint64_t r = (static_cast<uint64_t>(random()) << 32) ^ random();
    const std::string version = absl::StrFormat("v-%010d-%016x", step, r);
    const std::string dir = Join(checkpoint_dir, version);
    if (::mkdir(dir.c_str(), 0755) == 0) {
      w.version_ = version;
      w.version_dir_ = dir;
    } else if (errno != EEXIST) {
      const int err = errno;
      return absl::ErrnoToStatus(err, absl::StrCat("cannot create checkpoint version ", dir));
    }
  }
  if (w.version_.empty()) {
    return absl::InternalError(absl::StrCat("no fresh version directory name in ", checkpoint_dir));
  }
  return w;
}

CheckpointWriter::CheckpointWriter(CheckpointWriter&& other) noexcept
    : checkpoint_dir_(std::move(other.checkpoint_dir_)),
      version_dir_(std::move(other.version_dir_)),
      version_(std::move(other.version_)),
      previous_(std::move(other.previous_)),
      keep_(other.keep_),
      lock_fd_(other.lock_fd_),
      locked_(other.locked_),
      committed_(other.committed_) {
  other.lock_fd_ = -1;
}

CheckpointWriter::~CheckpointWriter() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

absl::Status CheckpointWriter::Commit(const v1::CheckpointManifest& manifest) {
  if (committed_) return absl::FailedPreconditionError("checkpoint version committed twice");
  RETURN_IF_ERROR(WriteManifest(version_dir_, manifest));
  // The commit: from this rename on, restore reads the new version.
  RETURN_IF_ERROR(WriteFileAtomically(Join(checkpoint_dir_, kCheckpointCurrentFile),
                                      absl::StrCat(version_, "\n")));
  committed_ = true;
  if (!locked_) return absl::OkStatus();
  // Kept: the new version, then the one committed before it, then the newest complete others.
  const std::vector<std::string> versions = VersionDirectories(checkpoint_dir_);
  std::vector<std::string> kept = {version_};
  if (!previous_.empty() && keep_ > 1) kept.push_back(previous_);
  for (const std::string& name : CompleteVersions(checkpoint_dir_, versions, kept)) {
    if (static_cast<int>(kept.size()) >= keep_) break;
    kept.push_back(name);
  }
  for (const std::string& name : versions) {
    if (std::find(kept.begin(), kept.end(), name) == kept.end()) {
      RemoveVersionFiles(Join(checkpoint_dir_, name));
    }
  }
  return absl::OkStatus();
}

void CheckpointWriter::Abandon() {
  if (committed_ || version_dir_.empty()) return;
  RemoveVersionFiles(version_dir_);
}

absl::StatusOr<CommittedCheckpoint> ReadCommittedCheckpoint(const std::string& checkpoint_dir) {
  CommittedCheckpoint c;
  ASSIGN_OR_RETURN(const std::string version, ReadCurrent(checkpoint_dir));
  if (version.empty()) {
    // No CURRENT: an old-format checkpoint (format 1) has its manifest directly here.
    absl::StatusOr<v1::CheckpointManifest> manifest = ReadManifest(checkpoint_dir);
    if (manifest.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat(
          checkpoint_dir, " holds no committed checkpoint (no ", kCheckpointCurrentFile,
          " and no ", kCheckpointManifestFile, "): it is not a checkpoint, or no save of it "
          "finished"));
    }
    if (!manifest.ok()) return manifest.status();
    c.directory = checkpoint_dir;
    c.manifest = *std::move(manifest);
    return c;
  }
  c.directory = Join(checkpoint_dir, version);
  struct stat st;
  if (::lstat(c.directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(Join(checkpoint_dir, kCheckpointCurrentFile),
                                            " names version ", version,
                                            ", which is missing (removed by a later save?)"));
  }
  return ReadCheckpointVersion(c.directory);
}

absl::StatusOr<CommittedCheckpoint> ReadCheckpointVersion(const std::string& version_dir) {
  CommittedCheckpoint c;
  c.directory = version_dir;
  ASSIGN_OR_RETURN(c.manifest, ReadManifest(c.directory));
  if (c.manifest.format_version() < 2) {
    return absl::DataLossError(absl::StrCat(Join(c.directory, kCheckpointManifestFile),
                                            " has format version ", c.manifest.format_version(),
                                            ": a versioned checkpoint's manifest carries a "
                                            "checksum (format 2 or later)"));
  }
  return c;
}

absl::StatusOr<std::vector<std::string>> RestorableVersions(const std::string& checkpoint_dir) {
  absl::StatusOr<std::string> current = ReadCurrent(checkpoint_dir);
  std::vector<std::string> names;
  int64_t max_step = INT64_MAX;
  if (current.ok()) {
    if (current->empty()) return std::vector<std::string>();
    names.push_back(*current);
    max_step = VersionStep(*current);
  } else if (current.status().code() != absl::StatusCode::kDataLoss) {
    return current.status();
  }
  for (const std::string& name :
       CompleteVersions(checkpoint_dir, VersionDirectories(checkpoint_dir), names)) {
    if (VersionStep(name) <= max_step) names.push_back(name);
  }
  std::vector<std::string> dirs;
  for (const std::string& name : names) dirs.push_back(Join(checkpoint_dir, name));
  return dirs;
}

}  // namespace meshrt
