// Lowering of the dataset ops (core/ops/ops_dataset.h): every processor reads its own slice of the
// batch from its local file, in the output's rule layout. The step is the only input: a scalar,
// resharded to the replicated layout (a no-op unless it is a partial sum). Nothing communicates.
#include "core/ops/lower_ops.h"
#include "core/ops/ops_dataset.h"
#include "util/status_macros.h"

namespace meshrt {
namespace dataset {

absl::StatusOr<LaidOutTensor> LowerTextWindows(LoweringContext& ctx, const v1::Op& op,
                                               const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  ASSIGN_OR_RETURN(const LaidOutTensor step,
                   ctx.builder.Reshard(inputs[0], ctx.RuleLayout(inputs[0].shape), op.name()));
  return ctx.builder.EmitLocal(op, {step}, type.shape, type.dtype, ctx.RuleLayout(type.shape));
}

}  // namespace dataset
}  // namespace meshrt
