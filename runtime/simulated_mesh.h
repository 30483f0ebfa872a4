// The simulated mesh: runs a lowered program on every processor of its mesh inside one process,
// one thread per processor, with the in-memory communicator (local_communicator.h). It is the
// oracle-side half of the layout-invariance tests: whole tensors in, whole tensors out, so results
// compare directly with the single-process reference interpreter.
#ifndef MESHRT_RUNTIME_SIMULATED_MESH_H_
#define MESHRT_RUNTIME_SIMULATED_MESH_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/kernel_runner.h"
#include "core/tensor.h"
#include "proto/program.pb.h"

namespace meshrt {

struct SimulatedMeshOptions {
  // Computes local ops on every processor. Borrowed; must be thread-safe (KernelRunner's contract)
  // and outlive the call. May be null only for programs without local ops.
  const KernelRunner* kernels = nullptr;
  // Longest any processor waits for its group in one collective.
  absl::Duration timeout = absl::Seconds(30);
  // Largest relative difference (MaxRelativeError) tolerated between copies of the same slice held
  // by different processors. Copies come from bitwise-identical collectives, so only a lowering bug
  // makes them differ.
  double replica_tolerance = 1e-5;
};

// Runs `program` on every processor of its mesh and returns every program output as a whole
// (global) tensor, by name.
//
// `whole_feeds` maps each program input to its whole tensor (shape and dtype as the program says);
// each processor is fed ExtractSlice of it under the input's layout.
//
// Errors:
//   - InvalidArgument before anything runs: bad mesh, a missing, unknown or mis-shaped feed (naming
//     the placeholder), a layout that does not fit.
//   - A processor's failure: the first processor to fail aborts the others (no hang) and its error
//     is returned, prefixed with its number and coordinate; the code is kept.
//   - Internal when processors holding copies of the same slice of an output disagree by more than
//     `replica_tolerance`: names the output and the two processors.
//
// Thread-safety: the call is self-contained; concurrent calls are independent.
absl::StatusOr<std::map<std::string, Tensor>> RunOnSimulatedMesh(
    const v1::Program& program, const std::map<std::string, Tensor>& whole_feeds,
    const SimulatedMeshOptions& options);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_SIMULATED_MESH_H_
