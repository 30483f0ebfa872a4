// FileAccessPolicy: which files and directories of this host a request may make the process touch.
// A graph's ops read files (text_windows' `path`) and checkpoints write and read directories, both
// named by whoever sends the graph or the request; a policy confines them to a few directories
// (roots) that the operator chose with a flag (`--data_dir`, `--checkpoint_root`).
//
// A path is resolved with realpath(3) (absolute, no "." or "..", every symlink followed) and must
// then lie in a root (itself resolved when the policy is made): "..", symlinks and absolute paths
// that lead out of every root are refused. Relative paths resolve against the process's working
// directory. The check is made at open time on the resolved path, and OpenRegularFile checks again
// on the descriptor it opened, so a symlink swapped in between the check and the open is caught.
//
// AllowAll() (the single-process reference interpreter, the simulated mesh, in-process test
// workers) allows every path; Under({}) allows none (a daemon started without the flag).
//
// Thread-safe (immutable after construction); the functions do blocking filesystem calls.
#ifndef MESHRT_UTIL_FILE_ACCESS_H_
#define MESHRT_UTIL_FILE_ACCESS_H_

#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {

class FileAccessPolicy {
 public:
  // Allows every path. Lives forever.
  static const FileAccessPolicy& AllowAll();

  // Allows only paths under `roots`, existing directories, resolved now. `flag` is the setting the
  // roots come from (e.g. "--data_dir"): every refusal names it, so the message says what to
  // change. No roots: nothing is allowed. InvalidArgument naming the root and the flag for a root
  // that does not exist or is not a directory.
  static absl::StatusOr<FileAccessPolicy> Under(const std::vector<std::string>& roots,
                                                std::string flag);

  bool allows_all() const { return allow_all_; }
  // The resolved roots (empty for AllowAll and for a policy allowing nothing).
  const std::vector<std::string>& roots() const { return roots_; }
  const std::string& flag() const { return flag_; }

  // True when `resolved` (absolute, already resolved) lies in a root (or the policy allows all).
  bool Contains(const std::string& resolved) const;

  // `path` resolved, when it lies in a root. `what` names the path in messages (e.g. "data file").
  // PermissionDenied naming `what`, the path (and what it resolves to) and the flag when the policy
  // allows nothing or the path resolves outside every root; NotFound (naming the path) when it
  // does not exist — said only for a path that would lie in a root, so that a refusal does not
  // tell whether a file outside exists (PermissionDenied instead); other errno errors name it too.
  absl::StatusOr<std::string> Resolve(const std::string& path, absl::string_view what) const;

  // A file opened for reading.
  struct OpenedFile {
    int fd = -1;          // owned by the caller, who closes it
    struct stat st = {};  // fstat of fd
    std::string resolved;
  };
  // Opens `path` to read: Resolve, then open the resolved path (without following a final symlink,
  // and without blocking on a FIFO), then check the open file: InvalidArgument naming `what` and
  // the path unless it is a regular file; PermissionDenied (as Resolve) when the descriptor turns
  // out to be a file outside the roots (a path component replaced by a symlink meanwhile).
  absl::StatusOr<OpenedFile> OpenRegularFile(const std::string& path,
                                             absl::string_view what) const;

 private:
  FileAccessPolicy() = default;

  // PermissionDenied for `path` (resolving to `resolved`, when known and different).
  absl::Status Refuse(absl::string_view what, const std::string& path,
                      const std::string& resolved) const;

  bool allow_all_ = false;
  std::vector<std::string> roots_;
  std::string flag_;
};

// `path` made absolute against the working directory and normalised without touching the
// filesystem: "." and empty components dropped, ".." removing the previous component ("/.." is
// "/"). For messages and for deciding which error a missing path gets; never for access checks.
std::string LexicallyNormal(const std::string& path);

}  // namespace meshrt

#endif  // MESHRT_UTIL_FILE_ACCESS_H_
