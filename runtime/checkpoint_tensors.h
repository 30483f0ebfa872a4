// A checkpoint as whole tensors, without a cluster: reading every variable of a checkpoint
// directory at its global shape (exporting weights), and writing tensors as a checkpoint that
// restores onto any mesh and layout (importing weights). Both go through the same files, checks
// and commit as the coordinator's save and restore (runtime/checkpoint.h, checkpoint_store.h):
// a checkpoint here is "saved on a one-processor mesh", one whole shard per variable.
//
// No gRPC: linked into the Python core (python/core_module.cc) and the CLI.
// Thread-compatible; functions do blocking filesystem calls.
#ifndef MESHRT_RUNTIME_CHECKPOINT_TENSORS_H_
#define MESHRT_RUNTIME_CHECKPOINT_TENSORS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ir/tensor.h"
#include "proto/program.pb.h"

namespace meshrt {

struct CheckpointTensors {
  int64_t step = 0;                        // the session's step count when it was saved
  std::map<std::string, Tensor> tensors;  // every variable, whole, by name
};

// The committed version of checkpoint directory `directory` (the version CURRENT names, or an
// old-format checkpoint), every variable assembled at its logical shape from its shards (a
// partial-sum variable's addends summed), each shard's size and checksum verified. The tensors'
// dims carry the saved dim names. Errors of ReadCommittedCheckpoint and LoadSlices: NotFound (not
// a checkpoint, a missing shard), DataLoss (a corrupted manifest or shard), naming the file.
absl::StatusOr<CheckpointTensors> ReadCheckpointTensors(const std::string& directory);

// Writes `tensors` as a new committed version of checkpoint directory `directory` (which must
// exist) with step count `step`: one whole shard per tensor, as a one-processor mesh saves it, so
// it restores onto any mesh and layout (and, partially, into a session with more variables:
// RestoreCheckpointRequest.partial). Through CheckpointWriter: the previous version stays
// committed until the new one is complete; `keep` (>= 1) versions are left. InvalidArgument for an
// empty name, a negative step or keep < 1; FailedPrecondition when a save of it is in progress;
// errno errors naming the file.
absl::Status WriteCheckpointFromTensors(const std::string& directory,
                                        const std::map<std::string, Tensor>& tensors,
                                        int64_t step, int keep = 2);

// The save both of the above's writer and an in-process (one-processor) trainer use: `variables`
// (whole slices by name) of `program` (on a one-processor mesh), as a new committed version of
// `directory` at `step`, keeping `keep` versions. A failed save is abandoned (the previous version
// stays committed). Errors of CheckpointWriter::Begin, SaveShards, BuildManifest and Commit.
absl::Status SaveOneProcessorCheckpoint(const std::string& directory, const v1::Program& program,
                                        const std::map<std::string, Tensor>& variables,
                                        int64_t step, int keep);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_CHECKPOINT_TENSORS_H_
