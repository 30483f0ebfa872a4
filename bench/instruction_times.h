// Per-instruction compute times of a lowered program, measured in this process: every local op
// one processor runs in a step (core/planning/explain.h StepInstructions), run alone through the workers'
// kernels (kernels/cpu_kernels.h) on slices of its shapes filled with small values (floats in
// [-1, 1], int32 in [0, 4)). A diagnostic for the cost model (plan_bench --per_instruction): it
// says which local instructions the model gets wrong, apart from communication, the step's
// overhead and overlap. Not the executor: no fusions (core/ir/step_fusion.h), no buffer pool,
// caches warm from the same inputs.
//
// Thread-safety: call from one thread (the kernels' OpenBLAS runs on it).
#ifndef MESHRT_BENCH_INSTRUCTION_TIMES_H_
#define MESHRT_BENCH_INSTRUCTION_TIMES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/program.pb.h"

namespace meshrt {
namespace bench {

// Seconds of each instruction of `program` (one entry per instruction): the median of `reps`
// runs after one untimed run for a local op the step runs, 0 for collectives, local slices and
// instructions that do not run, -1 for a local op whose kernel failed on these inputs.
// InvalidArgument when the program's buffers or shapes do not parse.
absl::StatusOr<std::vector<double>> LocalInstructionSeconds(const v1::Program& program,
                                                            const std::vector<std::string>& fetches,
                                                            int reps);

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_INSTRUCTION_TIMES_H_
