// Reductions: local reduce over the reduced dims of the slice, then allreduce with the matching op
// over the mesh axes that split a reduced dim (sum and mean: sum; max and any: max; min and all:
// min). reduce_logsumexp lowers in lower_math.cc. A mean over split dims is a local sum, an
// allreduce sum, then a local scale by 1/count (a local mean of means would be right too, but only
// when every slice has the same count; the sum form states the invariant plainly).
#include "absl/strings/str_cat.h"
#include "core/lower_ops.h"
#include "core/status_macros.h"

namespace meshrt {

absl::StatusOr<LaidOutTensor> LowerReduce(LoweringContext& ctx, const v1::Op& op,
                                          const LaidOutTensor& input) {
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
  v1::Op local = op;
  v1::ReduceOp reduce = v1::REDUCE_SUM;
  if (op.type() == "reduce_max" || op.type() == "reduce_any") {
    reduce = v1::REDUCE_MAX;  // any: local 0/1, then the max over processors
  } else if (op.type() == "reduce_min" || op.type() == "reduce_all") {
    reduce = v1::REDUCE_MIN;  // all: local 0/1, then the min over processors
  } else {
    local.set_type("reduce_sum");
  }
  ASSIGN_OR_RETURN(LaidOutTensor partial,
                   ctx.builder.EmitLocal(local, {input}, type.shape, type.dtype, out_layout));
  ASSIGN_OR_RETURN(LaidOutTensor whole, ctx.builder.AllReduce(partial, axes, reduce, op.name()));
  if (op.type() != "reduce_mean") return whole;
  v1::Op scale;
  scale.set_name(op.name());
  scale.set_type("scale");
  (*scale.mutable_attrs())["scalar"].set_f(1.0f / static_cast<float>(count));
  return ctx.builder.EmitLocal(scale, {whole}, type.shape, type.dtype, out_layout);
}

}  // namespace meshrt
