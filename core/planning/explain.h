// Human-readable account of a lowered program: every tensor's layout and slice shape, and every
// step that communicates, with its mesh dims and bytes. Used by the demo and `meshrt explain`.
#ifndef MESHRT_CORE_PLANNING_EXPLAIN_H_
#define MESHRT_CORE_PLANNING_EXPLAIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/planning/cost_model.h"
#include "proto/program.pb.h"

namespace meshrt {

struct CollectiveCost {
  int64_t slice_bytes = 0;  // bytes of the slice each worker contributes
  int64_t sent_bytes = 0;   // bytes each worker sends with a ring / pairwise algorithm
  int group_size = 1;
};

// Cost of instruction `index` of `program` (zero for local steps).
CollectiveCost CostOf(const v1::Program& program, int index);

// Which instructions a step runs (as runtime/executor.h prunes a step): those the outputs named in
// `fetches` and the variables' updates depend on. With `fetches` null, the outputs are every
// output except those marked resolved_on_fetch (resolves of lazy partial sums that no instruction
// reads): what a step fetching any of the other tensors runs, without the resolves that run only
// when their own tensor is fetched.
std::vector<bool> StepInstructions(const v1::Program& program,
                                   const std::vector<std::string>* fetches = nullptr);

// Bytes each worker sends in a step (CostOf summed over StepInstructions(program, fetches)).
int64_t SentBytesPerStep(const v1::Program& program,
                         const std::vector<std::string>* fetches = nullptr);

// Multi-line report: header (mesh, rules), a table of tensors, a table of communication steps and
// the total bytes sent per worker in a step (StepInstructions with `fetches`). Steps outside it
// (resolves that run only when their tensor is fetched) are listed marked "(on fetch)" and
// totalled apart. Guarded steps (proto Instruction.predicate, e.g. a microbatch accumulator's
// allreduce) count in the total, as on a step that runs them, are marked "(when 'P' is nonzero)"
// and subtotalled.
std::string ExplainProgram(const v1::Program& program,
                           const std::vector<std::string>* fetches = nullptr);

// The time report (core/planning/cost_model.h) that `meshrt explain` prints after ExplainProgram: per
// source op FLOPs, local bytes moved, bytes sent, predicted compute and communication time; the
// totals and the predicted step time (ProgramCost::step_s, with its serial sum beside it); the
// profile used (and a note while its α/β are
// placeholders); CostWarnings as "warning: ..." lines. Errors: CostProgram's.
absl::StatusOr<std::string> ExplainCost(const v1::Program& program, const HardwareProfile& profile,
                                        const std::vector<std::string>* fetches = nullptr);

// The same account as one JSON object: {"mesh", "rules", "tensors": [{name, shape, layout,
// slice}], "ops": [{name, flops, bytes_moved, sent_bytes, compute_s, comm_s}], "collectives":
// [{index, op, kind, mesh_dims, slice, sent_bytes, comm_s, in_step}], "totals": {flops,
// bytes_moved, sent_bytes, compute_s, comm_s, predicted_s (step_s), serial_s, overhead_s,
// communication_steps}, "profile":
// {source, collectives_measured}, "warnings": [..]}. Errors: CostProgram's.
absl::StatusOr<std::string> ExplainProgramJson(const v1::Program& program,
                                               const HardwareProfile& profile,
                                               const std::vector<std::string>* fetches = nullptr);

}  // namespace meshrt

#endif  // MESHRT_CORE_PLANNING_EXPLAIN_H_
