// Reductions (the records' lowering hooks, ops_math_reduce.cc): local reduce over the reduced dims
// of the slice, then allreduce with the record's combining op over the mesh axes that split a
// reduced dim (max and any: max; min and all: min). Sum and mean
// return partial sums over those axes instead, which LowerOp resolves (allreduce sum) or keeps
// lazy. reduce_logsumexp lowers in lower_math.cc. A mean over split dims is a local sum and a
// local scale by 1/count, then the sum over processors (a local mean of means would be right too,
// but only when every slice has the same count; the sum form states the invariant plainly).
#include "absl/strings/str_cat.h"
#include "core/ops/lower_ops.h"
#include "core/ops/ops_math.h"
#include "util/status_macros.h"

namespace meshrt {
namespace math {

absl::StatusOr<LaidOutTensor> LowerReduction(LoweringContext& ctx, const v1::Op& op,
                                             const std::vector<LaidOutTensor>& inputs,
                                             v1::ReduceOp across, bool mean) {
  const LaidOutTensor& input = inputs[0];
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout out_layout = ctx.RuleLayout(type.shape);
  std::vector<int> axes;
  int64_t count = 1;
  for (int i = 0; i < input.shape.rank(); ++i) {
    const Dim& d = input.shape.dim(i);
    if (type.shape.Contains(d.name)) continue;
    count *= d.size;
    if (input.layout.mesh_axis[i] != kReplicated) axes.push_back(input.layout.mesh_axis[i]);
  }
  if (axes.empty()) {
    return ctx.builder.EmitLocal(op, {input}, type.shape, type.dtype, out_layout);
  }
  // any and all: local 0/1, then the max (min) over processors; a mean: a local sum first.
  v1::Op local = op;
  if (mean) local.set_type("reduce_sum");
  ASSIGN_OR_RETURN(LaidOutTensor partial,
                   ctx.builder.EmitLocal(local, {input}, type.shape, type.dtype, out_layout));
  if (across != v1::REDUCE_SUM) return ctx.builder.AllReduce(partial, axes, across, op.name());
  // Sum and mean: a partial sum over the split reduced dims' axes (LowerOp resolves it, or keeps
  // it lazy); the mean's scale is linear, so it applies to the partial sum as well.
  if (mean) {
    v1::Op scale;
    scale.set_name(op.name());
    scale.set_type("scale");
    (*scale.mutable_attrs())["scalar"].set_f(1.0f / static_cast<float>(count));
    ASSIGN_OR_RETURN(partial,
                     ctx.builder.EmitLocal(scale, {partial}, type.shape, type.dtype, out_layout));
  }
  partial.partial_sum_axes = axes;
  return partial;
}

}  // namespace math
}  // namespace meshrt
