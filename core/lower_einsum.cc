// Einsum: classify the einsum's dims by name as XLA's dot handler does — a dim in the output is a
// batch or free dim, a dim only in inputs is reduced. Each mesh axis may split at most one einsum
// dim for the local products to be the right ones: when the rules put two dims of one einsum on the
// same mesh axis (legal, if they never share a tensor), the output's dim keeps the axis (else the
// first reduced dim met), and inputs are resharded to gather the others. Then: local einsum on
// slices, and allreduce(sum) over the axes that split a reduced dim — partial sums become whole.
#include <map>

#include "core/lower_ops.h"

namespace meshrt {

LaidOutTensor LowerEinsum(LoweringContext& ctx, const v1::Op& op,
                          const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  const Shape& out_shape = type.shape;

  // Which dim keeps each mesh axis.
  std::map<int, std::string> owner;
  for (const Dim& d : out_shape.dims()) {
    int a = ctx.rules.MeshAxisFor(d.name);
    if (a != kReplicated) owner.emplace(a, d.name);
  }
  std::vector<int> reduced_axes;
  for (const LaidOutTensor& in : inputs) {
    for (const Dim& d : in.shape.dims()) {
      int a = ctx.rules.MeshAxisFor(d.name);
      if (a == kReplicated || out_shape.Contains(d.name)) continue;
      if (owner.emplace(a, d.name).second) reduced_axes.push_back(a);
    }
  }

  std::vector<LaidOutTensor> operands;
  for (const LaidOutTensor& in : inputs) {
    TensorLayout want = in.layout;
    for (int i = 0; i < in.shape.rank(); ++i) {
      int a = want.mesh_axis[i];
      if (a != kReplicated && owner.at(a) != in.shape.dim(i).name) want.mesh_axis[i] = kReplicated;
    }
    operands.push_back(ctx.builder.Reshard(in, want, op.name()));
  }
  LaidOutTensor out =
      ctx.builder.EmitLocal(op, operands, out_shape, type.dtype, ctx.RuleLayout(out_shape));
  return ctx.builder.AllReduce(out, reduced_axes, v1::REDUCE_SUM, op.name());
}

}  // namespace meshrt
