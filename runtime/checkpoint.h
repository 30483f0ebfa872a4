// Checkpoints that move between meshes: the transport-free logic of saving and restoring a
// session's variables (format: proto/checkpoint.proto). Where checkpoints live (names under
// --checkpoint_root) and how a save commits atomically (versions and CURRENT):
// runtime/checkpoint_store.h. The functions here work on one directory holding a manifest and its
// shards: a checkpoint version (or an old-format checkpoint).
//
// The checkpoint directory must be visible at the same path to the coordinator and every worker
// (a shared filesystem; on Kubernetes a shared volume). Workers never create it: a worker that does
// not see the directory the coordinator created fails with NotFound saying so.
//
// Saving: each worker calls SaveShards with its executor's variable slices. Only the processor
// owning a distinct slice writes it — the one at coordinate 0 on every mesh axis the variable's
// layout does not use — one raw little-endian file per slice, written atomically. A partial-sum
// variable (proto ProgramVariable.partial_sum_axes, e.g. a microbatch accumulator in data
// parallelism) has no one owner along its partial axes: every processor there writes its slice
// as one addend (its rank along those axes), and the variable's value is their sum (format 3). The coordinator
// gathers the shard entries of every worker (BuildManifest) and writes `manifest.pbtxt` atomically
// LAST (WriteManifest, from CheckpointWriter::Commit, just before CURRENT names the version).
//
// Restoring: the coordinator reads the manifest (ReadManifest), checks it against the session's
// program (CheckManifestForProgram: same variable names, logical shapes and dtypes; mesh and
// layout may differ) and sends it to every worker. Each worker computes its slice of every
// variable under the NEW mesh and layout and reads every shard overlapping it (LoadSlices),
// verifying each shard's size and checksum, then installs all slices or none. A variable saved as
// addends is restored as their sum (added in addend order). A variable that is a partial sum in
// the NEW program: where its group along the partial axes has as many processors as the
// checkpoint has addends, rank r takes addend r (restored on the mesh it was saved on, every
// slice comes back bitwise); otherwise the processors at 0 along those axes take the sum and the
// others zeros. So a checkpoint restores onto any mesh and layout, partial or not, with the same
// values.
//
// Everything here is thread-compatible; functions touching files do blocking I/O.
#ifndef MESHRT_RUNTIME_CHECKPOINT_H_
#define MESHRT_RUNTIME_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/tensor.h"
#include "proto/checkpoint.pb.h"
#include "proto/program.pb.h"
#include "util/hash.h"

namespace meshrt {

// Written: 2 (manifest_checksum), or 3 when a variable is saved as addends (a partial-sum variable,
// proto CheckpointVariable.addends). Read: 1 (old checkpoints, no checksum, no versions) to 3.
inline constexpr int kCheckpointFormatVersion = 3;
// Most addends one variable may have (the size of a mesh group; a manifest saying more is
// damaged).
inline constexpr int kMaxCheckpointAddends = 1 << 16;
inline constexpr int kOldestCheckpointFormatVersion = 1;
inline constexpr char kCheckpointManifestFile[] = "manifest.pbtxt";

// The manifest's checksum, and old shards', is util/hash.h's Fnv1a64.

// The checksum kind saves write for shards (XXH3 64-bit: checksumming a multi-GB shard costs a
// fraction of writing it, where FNV-1a's byte-at-a-time loop ran at ~1 GB/s).
inline constexpr v1::ChecksumKind kShardChecksumKind = v1::CHECKSUM_XXH3_64;

// The checksum of `n` bytes computed as `kind` says. FailedPrecondition for a kind this build does
// not know (a checkpoint written by a newer meshrt), naming `what`.
absl::StatusOr<uint64_t> ShardChecksum(int kind, const void* data, size_t n,
                                       absl::string_view what);

// "<variable, percent-encoded>.<begin joined by '_'>.shard", e.g. "layer%2Fw.0_16.shard"; with
// `addend` >= 0 (one addend of a partial-sum variable), "layer%2Fw%2Facc.0_16.a1.shard".
std::string ShardFileName(const std::string& variable, const std::vector<int64_t>& begin,
                          int addend = -1);

// Worker side of a save: writes the slices of `variables` (this processor's, by name) that the
// processor at `coordinate` owns into `directory` and returns their manifest entries.
// FailedPrecondition when a variable of the program has no slice yet (no step has run);
// NotFound when the directory does not exist here (not a shared filesystem?); I/O errors naming
// the file.
absl::StatusOr<std::vector<v1::CheckpointShard>> SaveShards(
    const v1::Program& program, const std::vector<int64_t>& coordinate,
    const std::map<std::string, Tensor>& variables, const std::string& directory);

// Coordinator side of a save: the manifest of `program`'s variables with the shards every worker
// reported (in any order). Internal when the shards do not tile every variable exactly once.
absl::StatusOr<v1::CheckpointManifest> BuildManifest(const v1::Program& program, int64_t step,
                                                     std::vector<v1::CheckpointShard> shards);

// 64-bit FNV-1a of `manifest`'s deterministic binary serialization with manifest_checksum
// cleared: what manifest_checksum holds.
uint64_t ManifestChecksum(const v1::CheckpointManifest& manifest);

// Writes `manifest` as `directory`/manifest.pbtxt (text format), atomically, with its
// manifest_checksum set.
absl::Status WriteManifest(const std::string& directory, const v1::CheckpointManifest& manifest);

// Reads and checks the manifest of `directory`: NotFound when there is none (not a checkpoint, or
// an incomplete one); DataLoss naming the file when it does not parse, its manifest_checksum does
// not match (required from format 2 on: a changed step or shard list is caught), or it is
// inconsistent (unknown format version, shards outside their variable or not tiling it).
absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& directory);

// Checks that `manifest` (already consistent, e.g. from ReadManifest) can restore `program`: every
// program variable is saved with the same logical shape and dtype, and no other variable is.
// InvalidArgument naming every missing, extra and mismatched variable.
absl::Status CheckManifestForProgram(const v1::CheckpointManifest& manifest,
                                     const v1::Program& program);

// The mesh, rules and those of the variables of `program` that `manifest` holds (no instructions) (for a partial restore:
// CheckManifestForProgram and LoadSlices on it check and load exactly the saved variables, and
// still refuse a saved variable the program lacks).
v1::Program ProgramWithSavedVariables(const v1::Program& program,
                                      const v1::CheckpointManifest& manifest);

// Worker side of a restore: this processor's slice of every variable of `program` under the
// program's mesh and layout, assembled from the shards of `manifest` in `directory` that overlap
// it. Only overlapping shards are read; each is verified (size and checksum). NotFound for a
// missing shard file, DataLoss for a corrupted one — both naming the file and the variable.
absl::StatusOr<std::map<std::string, Tensor>> LoadSlices(const v1::CheckpointManifest& manifest,
                                                         const std::string& directory,
                                                         const v1::Program& program,
                                                         const std::vector<int64_t>& coordinate);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_CHECKPOINT_H_
