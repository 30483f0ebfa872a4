// Einsum: classify the einsum's dims by name as XLA's dot handler does — a dim in the output is a
// batch or free dim, a dim only in inputs is reduced. The local products are right when each mesh
// axis splits at most one einsum dim, so when the rules put several dims of one einsum on the same
// mesh axis (legal if they never share a tensor) one keeps the axis and the operands are
// resharded to gather the others. Which one keeps it is a cost choice:
//   - the output's dim (A): gather the reduced dim's operands; the result is split and final;
//   - a reduced dim (B): gather the output dim's operands, compute partial sums of the whole output
//     dim, then reduce-scatter them onto the output dim (no output dim on the axis: always B,
//     finished by an allreduce).
// We pick the one moving fewer bytes. Then: local einsum on slices, returned as partial sums over
// the axes of split reduced dims; LowerOp resolves them by Reshard to the output's rule layout
// (allreduce, or reduce-scatter under B) where a consumer needs the value (core/lowering/lowering.h).
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/ops/lower_ops.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

int64_t SliceElements(const LoweringContext& ctx, const LaidOutTensor& t) {
  return SliceShape(t.shape, t.layout, ctx.mesh()).num_elements();
}

}  // namespace

absl::StatusOr<LaidOutTensor> LowerEinsum(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  const Shape& out_shape = type.shape;
  const TensorLayout out_layout = ctx.RuleLayout(out_shape);

  // The einsum's dims on each mesh axis, output dims first.
  std::map<int, std::vector<std::string>> on_axis;
  auto note = [&](const std::string& name) {
    int a = ctx.rules.MeshAxisFor(name);
    if (a == kReplicated) return;
    std::vector<std::string>& v = on_axis[a];
    if (std::find(v.begin(), v.end(), name) == v.end()) v.push_back(name);
  };
  for (const Dim& d : out_shape.dims()) note(d.name);
  for (const LaidOutTensor& in : inputs) {
    for (const Dim& d : in.shape.dims()) note(d.name);
  }

  std::map<int, std::string> owner;  // the dim that keeps each axis
  for (const auto& [axis, dims] : on_axis) {
    const bool output_dim = out_shape.Contains(dims[0]);
    if (dims.size() == 1 || !output_dim) {
      owner[axis] = dims[0];
      continue;
    }
    // Option A keeps the output dim: every operand holding another dim on this axis is gathered.
    // Option B keeps the first reduced dim: operands holding the output dim are gathered, then
    // the output's partial sums are reduce-scattered. Compare elements sent per processor.
    const int64_t g = ctx.mesh().size(axis);
    int64_t cost_a = 0, cost_b = 0;
    for (const LaidOutTensor& in : inputs) {
      for (const Dim& d : in.shape.dims()) {
        if (ctx.rules.MeshAxisFor(d.name) != axis) continue;
        (d.name == dims[0] ? cost_b : cost_a) += SliceElements(ctx, in) * (g - 1);
      }
    }
    cost_b += SliceShape(out_shape, out_layout, ctx.mesh()).num_elements() * (g - 1);
    owner[axis] = cost_a <= cost_b ? dims[0] : dims[1];
  }

  // The dim keeping mesh axis `a`; every axis of an input's rule layout is in `owner`.
  auto owner_of = [&](int a) -> absl::StatusOr<std::string> {
    auto it = owner.find(a);
    if (it == owner.end()) {
      return LoweringBug(op, absl::StrCat("an input is split over mesh axis ", a,
                                          ", which the rules give none of its dims"));
    }
    return it->second;
  };
  std::vector<LaidOutTensor> operands;
  for (const LaidOutTensor& in : inputs) {
    TensorLayout want = in.layout;
    for (int i = 0; i < in.shape.rank(); ++i) {
      int a = want.mesh_axis[i];
      if (a == kReplicated) continue;
      ASSIGN_OR_RETURN(const std::string dim, owner_of(a));
      if (dim != in.shape.dim(i).name) want.mesh_axis[i] = kReplicated;
    }
    ASSIGN_OR_RETURN(LaidOutTensor operand, ctx.builder.Reshard(in, want, op.name()));
    operands.push_back(std::move(operand));
  }
  TensorLayout local_layout = out_layout;
  std::vector<int> partial;
  for (const auto& [axis, dim] : owner) {
    if (!out_shape.Contains(dim)) partial.push_back(axis);
  }
  for (int& a : local_layout.mesh_axis) {
    if (a == kReplicated) continue;
    ASSIGN_OR_RETURN(const std::string dim, owner_of(a));
    if (!out_shape.Contains(dim)) a = kReplicated;
  }
  ASSIGN_OR_RETURN(LaidOutTensor out,
                   ctx.builder.EmitLocal(op, operands, out_shape, type.dtype, local_layout));
  out.partial_sum_axes = partial;
  return out;  // LowerOp resolves the partial sums, or keeps them lazy
}

}  // namespace meshrt
