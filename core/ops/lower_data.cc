// SPMD lowering of the data-movement family (slice, split, pad, concat, stack, unstack;
// replace_dims is a reshape and goes through LowerReshape).
//
// The kernels of this family copy runs along one dim and are correct on any slice that holds that
// dim whole. So the general lowering is:
//   1. gather each input along the op's dim when a mesh dim splits it (Reshard: allgather over that
//      mesh dim) — Mesh-TensorFlow raised an error here instead;
//   2. run the op locally, its output dim whole (the other dims split as the rules say: they are
//      the inputs' dims, with the same names, so the same mesh dims);
//   3. Reshard to the output's rule layout (a local slice of the output dim if the rules split it).
// Cheaper special cases:
//   - slice/split/unstack of a range inside one processor's part: every processor cuts that range
//     at the owner's local offset, and a broadcast from the owner replaces the others' cuts (size
//     elements per row move, not the whole dim);
//   - slice/pad that keep the whole dim (a rename): a local copy of each slice, then Reshard;
//   - stack never communicates: its new dim is made whole and sliced locally.
#include "absl/strings/str_cat.h"
#include "core/ops/lower_ops.h"
#include "core/ops/ops_data.h"
#include "util/status_macros.h"

namespace meshrt {
TensorLayout WithAxis(TensorLayout layout, int dim, int axis) {
  layout.mesh_axis[dim] = axis;
  return layout;
}

absl::StatusOr<LaidOutTensor> WholeAlong(LoweringContext& ctx, const LaidOutTensor& t, int dim,
                                         const v1::Op& op) {
  if (t.layout.mesh_axis[dim] == kReplicated) return t;
  return ctx.builder.Reshard(t, WithAxis(t.layout, dim, kReplicated), op.name());
}

absl::StatusOr<LaidOutTensor> LocalThenRule(LoweringContext& ctx, const v1::Op& op,
                                            const v1::Op& local,
                                            const std::vector<LaidOutTensor>& inputs, int out_dim) {
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout rule = ctx.RuleLayout(type.shape);
  const TensorLayout whole = out_dim < 0 ? rule : WithAxis(rule, out_dim, kReplicated);
  ASSIGN_OR_RETURN(LaidOutTensor out,
                   ctx.builder.EmitLocal(local, inputs, type.shape, type.dtype, whole));
  return ctx.builder.Reshard(out, rule, op.name());
}

v1::Op LocalSliceOp(const v1::Op& op, const std::string& dim, int64_t begin, int64_t size,
                    const std::string& new_dim) {
  v1::Op s;
  s.set_name(op.name());
  s.set_type("slice");
  s.add_dims(dim);
  (*s.mutable_attrs())["begin"].set_i(begin);
  (*s.mutable_attrs())["size"].set_i(size);
  (*s.mutable_attrs())["new_dim"].set_s(new_dim);
  return s;
}

namespace {

// `local_op` cuts, from each processor's part of `x`'s dim `di` (split over `axis`), what the op
// keeps of the part of processor `owner` along that axis: the slice of `op`'s output (graph type)
// with `out_dim` whole (-1: none). A broadcast from the owner makes every processor's cut the
// owner's, so the result is that output; then a reshard to its rule layout. (Until the broadcast,
// the other processors' cuts are of their own parts: the layout describes the result after it.)
absl::StatusOr<LaidOutTensor> BroadcastFromOwner(LoweringContext& ctx, const v1::Op& op,
                                                 const v1::Op& local_op, const LaidOutTensor& x,
                                                 int axis, int64_t owner, int out_dim) {
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout rule = ctx.RuleLayout(type.shape);
  const TensorLayout whole = out_dim < 0 ? rule : WithAxis(rule, out_dim, kReplicated);
  ASSIGN_OR_RETURN(LaidOutTensor cut,
                   ctx.builder.EmitLocal(local_op, {x}, type.shape, type.dtype, whole));
  ASSIGN_OR_RETURN(LaidOutTensor out,
                   ctx.builder.Broadcast(cut, {axis}, static_cast<int>(owner), op.name()));
  return ctx.builder.Reshard(out, rule, op.name());
}

}  // namespace

absl::StatusOr<LaidOutTensor> LowerSliceOp(LoweringContext& ctx, const v1::Op& op,
                                           const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const int di = x.shape.IndexOf(op.dims(0));
  const int64_t n = x.shape.dim(di).size;
  ASSIGN_OR_RETURN(const DimRange r, KeptRange(op, n));
  const std::string out_name = ctx.graph.type(op.name()).shape.dim(di).name;
  const int axis = x.layout.mesh_axis[di];
  if (axis == kReplicated) return LocalThenRule(ctx, op, op, {x}, di);
  const int64_t local = n / ctx.mesh().size(axis);
  if (r.size == n) {
    // The whole dim: each slice keeps its part under the new name.
    const TensorType& type = ctx.graph.type(op.name());
    ASSIGN_OR_RETURN(LaidOutTensor out,
                     ctx.builder.EmitLocal(LocalSliceOp(op, op.dims(0), 0, local, out_name), {x},
                                           type.shape, type.dtype, x.layout));
    return ctx.builder.Reshard(out, ctx.RuleLayout(type.shape), op.name());
  }
  const int64_t owner = r.begin / local;
  if (owner == (r.begin + r.size - 1) / local) {
    return BroadcastFromOwner(ctx, op,
                              LocalSliceOp(op, op.dims(0), r.begin % local, r.size, out_name), x,
                              axis, owner, di);
  }
  ASSIGN_OR_RETURN(LaidOutTensor whole, WholeAlong(ctx, x, di, op));
  return LocalThenRule(ctx, op, op, {whole}, di);
}

absl::StatusOr<LaidOutTensor> LowerUnstackOp(LoweringContext& ctx, const v1::Op& op,
                                             const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const int di = x.shape.IndexOf(op.dims(0));
  const int axis = x.layout.mesh_axis[di];
  if (axis == kReplicated) return LocalThenRule(ctx, op, op, {x}, -1);
  const int64_t local = x.shape.dim(di).size / ctx.mesh().size(axis);
  const int64_t index = IntAttrOr(op, "index", 0);
  v1::Op cut = op;
  (*cut.mutable_attrs())["index"].set_i(index % local);
  return BroadcastFromOwner(ctx, op, cut, x, axis, index / local, -1);
}

absl::StatusOr<LaidOutTensor> LowerPadOp(LoweringContext& ctx, const v1::Op& op,
                                         const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const int di = x.shape.IndexOf(op.dims(0));
  if (IntAttrOr(op, "before", 0) == 0 && IntAttrOr(op, "after", 0) == 0 &&
      x.layout.mesh_axis[di] != kReplicated) {
    // A rename: each slice keeps its part.
    const TensorType& type = ctx.graph.type(op.name());
    ASSIGN_OR_RETURN(LaidOutTensor out,
                     ctx.builder.EmitLocal(op, {x}, type.shape, type.dtype, x.layout));
    return ctx.builder.Reshard(out, ctx.RuleLayout(type.shape), op.name());
  }
  ASSIGN_OR_RETURN(LaidOutTensor whole, WholeAlong(ctx, x, di, op));
  return LocalThenRule(ctx, op, op, {whole}, di);
}

absl::StatusOr<LaidOutTensor> LowerConcatOp(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs) {
  std::vector<LaidOutTensor> wholes;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const std::string& dim = op.dims(op.dims_size() == 1 ? 0 : static_cast<int>(j));
    ASSIGN_OR_RETURN(LaidOutTensor whole,
                     WholeAlong(ctx, inputs[j], inputs[j].shape.IndexOf(dim), op));
    wholes.push_back(std::move(whole));
  }
  return LocalThenRule(ctx, op, op, wholes, inputs[0].shape.IndexOf(op.dims(0)));
}

absl::StatusOr<LaidOutTensor> LowerStackOp(LoweringContext& ctx, const v1::Op& op,
                                           const std::vector<LaidOutTensor>& inputs) {
  const Shape& out = ctx.graph.type(op.name()).shape;
  ASSIGN_OR_RETURN(const std::string new_dim, StringAttr(op, "new_dim"));
  return LocalThenRule(ctx, op, op, inputs, out.IndexOf(new_dim));
}

}  // namespace meshrt
