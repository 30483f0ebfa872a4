// Lowering of the random and fill ops (core/ops/ops_random.h): each processor computes its own slice
// in the output's rule layout. Random values are keyed on global element indices (the executor
// tells the kernel where the slice sits), so no processor needs another's data and nothing
// communicates; dropout's input is already in that layout, since it has the output's dims, and
// random_uniform/normal's optional step is a replicated scalar.
#include "core/ops/lower_ops.h"
#include "core/ops/ops_random.h"
#include "util/status_macros.h"

namespace meshrt {
namespace rng {

absl::StatusOr<LaidOutTensor> LowerRandom(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  // The random ops' step is a scalar: resharding it to its (replicated) rule layout only resolves a
  // partial sum. Dropout's input already has the output's rule layout.
  std::vector<LaidOutTensor> in = inputs;
  for (LaidOutTensor& t : in) {
    ASSIGN_OR_RETURN(t, ctx.builder.Reshard(t, ctx.RuleLayout(t.shape), op.name()));
  }
  return ctx.builder.EmitLocal(op, in, type.shape, type.dtype, ctx.RuleLayout(type.shape));
}

}  // namespace rng
}  // namespace meshrt
