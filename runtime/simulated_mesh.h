// The simulated mesh: runs a lowered program on every processor of its mesh inside one process,
// one thread per processor, with the in-memory communicator (local_communicator.h). It is the
// oracle-side half of the layout-invariance tests: whole tensors in, whole tensors out, so results
// compare directly with the single-process reference interpreter.
#ifndef MESHRT_RUNTIME_SIMULATED_MESH_H_
#define MESHRT_RUNTIME_SIMULATED_MESH_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ir/mesh.h"
#include "core/ir/tensor.h"
#include "core/ops/kernel_runner.h"
#include "proto/program.pb.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"

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
  // Every processor's executor's (e.g. overlap_comm = false to run collectives inline).
  ExecutorOptions executor;
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

// A simulated mesh that lives across steps, so variables (core/ops/ops_state.h) keep their slices on
// its processors between them. Step's errors are RunOnSimulatedMesh's. Not thread-safe.
class SimulatedMesh {
 public:
  // `program` is borrowed and must outlive the mesh. InvalidArgument for a bad mesh.
  static absl::StatusOr<std::unique_ptr<SimulatedMesh>> Create(
      const v1::Program& program, const SimulatedMeshOptions& options);
  ~SimulatedMesh();

  // Runs one step; returns the whole program outputs named in `fetches` (every output if empty).
  absl::StatusOr<std::map<std::string, Tensor>> Step(
      const std::map<std::string, Tensor>& whole_feeds, const std::vector<std::string>& fetches = {});

  // Every variable as a whole tensor (assembled from the processors' slices, replicas checked;
  // a partial-sum variable, proto ProgramVariable.partial_sum_axes, summed over its axes).
  // FailedPrecondition (in Internal) before the first step initialises them.
  absl::StatusOr<std::map<std::string, Tensor>> Variables() const;

  // Replaces variables' values: each processor takes its slice of the whole tensor (a partial-sum
  // variable: the processors at 0 along its axes; zeros on the others). NotFound for a name that
  // is not a variable; the executor's InvalidArgument for a wrong shape.
  absl::Status SetVariables(const std::map<std::string, Tensor>& whole);

 private:
  SimulatedMesh(const v1::Program& program, Mesh mesh, const SimulatedMeshOptions& options);

  const v1::Program& program_;
  const Mesh mesh_;
  const SimulatedMeshOptions options_;
  std::unique_ptr<LocalCollectiveHub> hub_;
  std::vector<std::unique_ptr<Executor>> executors_;
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_SIMULATED_MESH_H_
