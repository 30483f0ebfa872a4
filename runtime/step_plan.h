// StepPlan: what one step of a lowered program does for one fetch list, decided before it runs
// (runtime/executor.h runs it). A pure function of the program and the fetches: no buffers, no
// communicator, no mesh coordinate, so every processor derives the same plan and so makes the same
// collective calls, and the executor computes it once per distinct fetch list.
//
//   - Pruning (as TensorFlow prunes a step to its fetches): an instruction runs when a fetched
//     output, a variable's update or a later running instruction needs what it writes. Without a
//     fetch list (null) every instruction runs and every output is fetched.
//   - Guarded instructions (proto Instruction.predicate): a running one that no fetched output
//     depends on may be skipped when its predicate is zero. Only with a fetch list.
//   - Pinned buffers (core/ir/step_fusion.h StepPinnedBuffers) are never freed early, nor are the
//     inputs of deferred allreduces (read when their bucket runs).
//   - Fusions (core/ir/step_fusion.h FindFusions), only with a fetch list: each S with the
//     instructions it runs, and the fused instruction (FusedInstruction) that replaces S; the
//     absorbed instructions no longer run at their own positions.
//   - Deferred allreduces (core/ir/step_fusion.h DeferredAllReduceBytes): small running ALLREDUCEs
//     wait until the first running instruction that reads their result (their `due` position;
//     instructions_size() when none does: the end of the step).
//
// Malformed programs (buffer indices out of range, unparsable shapes) are planned around, never
// rejected: out-of-range buffers select and pin nothing, and the executor reports the error when
// the instruction runs. The fetch list's order and repeats do not matter (StepPlanKey).
//
// Thread-safety: PlanStep is reentrant; a StepPlan is immutable once made and may be read from any
// number of threads.
#ifndef MESHRT_RUNTIME_STEP_PLAN_H_
#define MESHRT_RUNTIME_STEP_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ir/step_fusion.h"
#include "proto/program.pb.h"

namespace meshrt {

struct StepPlan {
  std::vector<bool> runs;               // instruction -> runs at its own position
  std::vector<bool> guarded;            // instruction -> skipped (zeros) when its predicate is 0
  std::vector<int> due;                 // instruction -> -1, or (deferred) the position it must
                                        // run before (instructions_size(): the end of the step)
  std::vector<int64_t> deferred_bytes;  // instruction -> its slice's bytes when deferred, else 0
  std::vector<int> last_reader;         // buffer -> last running instruction reading it (-1: none)
  std::vector<bool> pinned;             // buffer -> never freed early
  std::map<int, FusedUpdate> fused;     // S -> the instructions it runs with
  // S -> the fused local instruction run in its place (core/ir/step_fusion.h FusedInstruction);
  // when its kernel fails, fused[S]'s instructions and S run one by one instead.
  std::map<int, v1::Instruction> fused_instructions;
  // Running instruction -> the buffers it reads, then those its fused instructions read (once per
  // read, in order; in-range or not, as the program says). Empty for one that does not run.
  std::vector<std::vector<int>> reads;
  // Running instruction -> its output, then its fused instructions' outputs.
  std::vector<std::vector<int>> writes;

  // True when `instruction` is the last reader of `buffer` and the buffer is not pinned: the
  // buffer's storage may be given back after it. False for a buffer out of range.
  bool Dead(int buffer, int instruction) const;
};

// The cache key of a fetch list: sorted, without repeats; {"\x01all"} for null (every output).
std::vector<std::string> StepPlanKey(const std::vector<std::string>* fetches);

// The plan of one step of `program` fetching `fetches` (null: every output; names that are not
// outputs select nothing). Deterministic; equal fetch lists up to order and repeats give equal
// plans.
StepPlan PlanStep(const v1::Program& program, const std::vector<std::string>* fetches);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_STEP_PLAN_H_
