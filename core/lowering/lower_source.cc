// Placeholders become program inputs (each processor is fed its slice). A constant is materialised
// whole on every processor, then sliced locally to its layout: no communication either way.
#include "core/ops/lower_ops.h"
#include "util/status_macros.h"

namespace meshrt {

absl::StatusOr<LaidOutTensor> LowerSource(LoweringContext& ctx, const v1::Op& op) {
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout layout = ctx.RuleLayout(type.shape);
  if (IsFed(op)) {
    return ctx.builder.AddInput(op.name(), type.shape, type.dtype, layout);
  }
  TensorLayout replicated{std::vector<int>(type.shape.rank(), kReplicated)};
  ASSIGN_OR_RETURN(LaidOutTensor whole,
                   ctx.builder.EmitLocal(op, {}, type.shape, type.dtype, replicated));
  return ctx.builder.Reshard(whole, layout, op.name());
}

}  // namespace meshrt
