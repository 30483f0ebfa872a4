// Elementwise ops never communicate: layouts follow dim names, so every input dim is split exactly
// as the same dim of the output, and a dim an input lacks is whole (replicated) on each processor —
// the local kernel broadcasts it.
#include "core/ops/lower_ops.h"

namespace meshrt {

absl::StatusOr<LaidOutTensor> LowerElementwise(LoweringContext& ctx, const v1::Op& op,
                                               const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  return ctx.builder.EmitLocal(op, inputs, type.shape, type.dtype, ctx.RuleLayout(type.shape));
}

}  // namespace meshrt
