// Where checkpoints live and how a save commits (the layout: proto/checkpoint.proto).
//
// CheckpointRoot: a client names a checkpoint relative to the coordinator's --checkpoint_root
// ("ck", "runs/ck"); Resolve turns the name into a directory under the root, refusing names that
// are absolute, contain "..", or lead out of the root through a symlink.
//
// A checkpoint directory holds versions, each a directory `v-<step>-<random>/` with its shards and
// manifest.pbtxt, and a file CURRENT naming the committed version (LevelDB's CURRENT): a save
// writes a new version beside the old ones and commits it by replacing CURRENT atomically (write
// CURRENT.tmp, fsync, rename, fsync the directory). Until that rename, CURRENT still names the
// previous version, so a save that fails or dies half way (a worker killed, a disk error, the
// coordinator killed) leaves the previous checkpoint restorable. After the commit, a save keeps
// `keep` versions (default 2): the new one, the one committed before it, and the newest other
// complete versions (those with a manifest, by step); the rest are removed — only directories
// named like versions, and in them only meshrt's files (manifest.pbtxt, *.shard and their .tmp
// files); a directory holding anything else is left. Restore reads the version CURRENT names; a
// caller that finds it damaged may fall back to the older complete versions a save kept
// (RestorableVersions), newest first.
// Nothing else in the checkpoint directory (an old-format checkpoint's files, other files) is ever
// deleted.
//
// One save at a time per checkpoint directory: CheckpointWriter holds an exclusive flock(2) on
// `LOCK` in it from Begin to its destruction (released by the kernel if the process dies), so a
// second save — from this or another process — is refused rather than racing the first's cleanup.
// A restore takes no lock; one that overlaps two later commits may find its version removed and
// fails with NotFound (nothing is installed: the workers' restore is two-phase).
//
// Thread-compatible; functions do blocking filesystem calls.
#ifndef MESHRT_RUNTIME_CHECKPOINT_STORE_H_
#define MESHRT_RUNTIME_CHECKPOINT_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/checkpoint.pb.h"
#include "util/file_access.h"

namespace meshrt {

inline constexpr char kCheckpointCurrentFile[] = "CURRENT";
inline constexpr char kCheckpointLockFile[] = "LOCK";

class CheckpointRoot {
 public:
  // `root`: an existing directory, resolved now. `flag` names the setting in every error.
  // FailedPrecondition naming the flag when `root` is empty (checkpoints are off); InvalidArgument
  // when it is not an existing directory.
  static absl::StatusOr<CheckpointRoot> Open(const std::string& root,
                                             const std::string& flag = "--checkpoint_root");

  // The resolved root.
  const std::string& path() const { return policy_.roots()[0]; }

  // The absolute, resolved directory of checkpoint `name`. InvalidArgument naming the name and the
  // flag when it is empty, absolute, or has an empty, "." or ".." component; PermissionDenied
  // (naming both) when a component resolves out of the root (a symlink); FailedPrecondition when
  // a component is not a directory. `create`: missing directories are made (mode 0755), each only
  // after the one above it was checked; otherwise a missing one is NotFound naming the name.
  absl::StatusOr<std::string> Resolve(const std::string& name, bool create) const;

 private:
  explicit CheckpointRoot(FileAccessPolicy policy) : policy_(std::move(policy)) {}
  FileAccessPolicy policy_;  // exactly one root
};

// "v-<decimal step>-<16 lowercase hex digits>": the name of a checkpoint version directory.
bool IsCheckpointVersionName(absl::string_view name);

// One save into a checkpoint directory. Move-only. Destroying it without Commit leaves the new
// version uncommitted (ignored by restore, removed by the next save's cleanup) and releases LOCK.
class CheckpointWriter {
 public:
  // Takes `checkpoint_dir`/LOCK, reads which version CURRENT commits (if any) and creates a new,
  // empty version directory for `step`. FailedPrecondition when another save holds the lock;
  // DataLoss when CURRENT names no version; errno errors naming the file.
  // `keep` (>= 1): how many versions the commit leaves, the new one included.
  static absl::StatusOr<CheckpointWriter> Begin(const std::string& checkpoint_dir, int64_t step,
                                                int keep = 2);

  CheckpointWriter(CheckpointWriter&& other) noexcept;
  CheckpointWriter& operator=(CheckpointWriter&&) = delete;
  ~CheckpointWriter();

  // Absolute path of the new version directory: where the shards go.
  const std::string& version_dir() const { return version_dir_; }
  // The version committed when Begin ran ("" if none).
  const std::string& previous() const { return previous_; }

  // Writes `manifest` (with its checksum) into the new version, then commits: CURRENT names it.
  // Afterwards removes the other versions except the previous one (see the file comment). An error
  // before the commit leaves the previous version committed; errors of the cleanup are ignored.
  absl::Status Commit(const v1::CheckpointManifest& manifest);

  // Removes the new version's own files (after a failed save). Best effort; idempotent.
  void Abandon();

 private:
  CheckpointWriter() = default;

  std::string checkpoint_dir_;
  std::string version_dir_;
  std::string version_;
  std::string previous_;
  int keep_ = 2;
  int lock_fd_ = -1;
  bool locked_ = false;  // false when the filesystem has no flock: nothing is then removed
  bool committed_ = false;
};

// A committed checkpoint, ready to restore.
struct CommittedCheckpoint {
  // Where its manifest and shards are: the version CURRENT names, or the checkpoint directory
  // itself for an old-format checkpoint (manifest.pbtxt directly in it, no CURRENT).
  std::string directory;
  v1::CheckpointManifest manifest;  // read and verified (ReadManifest)
};

// Follows CURRENT in `checkpoint_dir` (else an old-format manifest there). NotFound when the
// directory holds neither (not a checkpoint, or no save of it finished) or the version CURRENT
// names is missing; DataLoss when CURRENT is malformed or the manifest is corrupted (ReadManifest),
// naming the file.
absl::StatusOr<CommittedCheckpoint> ReadCommittedCheckpoint(const std::string& checkpoint_dir);

// The version directories (absolute) a restore of `checkpoint_dir` may use, newest first: the one
// CURRENT names, then the other versions with a manifest whose step is not above CURRENT's, by
// step. Empty when there is no CURRENT (an old-format checkpoint, or none). Errors of CURRENT as
// ReadCommittedCheckpoint; when CURRENT is corrupted, every version with a manifest, by step.
absl::StatusOr<std::vector<std::string>> RestorableVersions(const std::string& checkpoint_dir);

// Reads and verifies the manifest of one version directory (as ReadCommittedCheckpoint does for
// the version CURRENT names): NotFound / DataLoss naming the file.
absl::StatusOr<CommittedCheckpoint> ReadCheckpointVersion(const std::string& version_dir);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_CHECKPOINT_STORE_H_
