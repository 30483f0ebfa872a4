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
//   - slice/split/unstack of a range inside one slice's part: every processor cuts the same local
//     window, the windows are allgathered (g x size elements per row instead of the whole dim), and
//     the owner's window is picked locally;
//   - slice/pad that keep the whole dim (a rename): a local copy of each slice, then Reshard;
//   - stack never communicates: its new dim is made whole and sliced locally.
#include "absl/strings/str_cat.h"
#include "core/lower_ops.h"
#include "core/ops_data.h"

namespace meshrt {
TensorLayout WithAxis(TensorLayout layout, int dim, int axis) {
  layout.mesh_axis[dim] = axis;
  return layout;
}

LaidOutTensor WholeAlong(LoweringContext& ctx, const LaidOutTensor& t, int dim, const v1::Op& op) {
  if (t.layout.mesh_axis[dim] == kReplicated) return t;
  return ctx.builder.Reshard(t, WithAxis(t.layout, dim, kReplicated), op.name());
}

LaidOutTensor LocalThenRule(LoweringContext& ctx, const v1::Op& op, const v1::Op& local,
                            const std::vector<LaidOutTensor>& inputs, int out_dim) {
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout rule = ctx.RuleLayout(type.shape);
  const TensorLayout whole = out_dim < 0 ? rule : WithAxis(rule, out_dim, kReplicated);
  LaidOutTensor out = ctx.builder.EmitLocal(local, inputs, type.shape, type.dtype, whole);
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

// For a range [begin, begin + size) of dim `di` of `x`, split over mesh axis `axis` into parts of
// `local` elements, held by one part: every processor cuts that window of its own part, and the
// windows are allgathered. Returns the gathered tensor (dim `di` of size g * size, whole; the
// owner's window is part begin / local).
LaidOutTensor GatherWindow(LoweringContext& ctx, const v1::Op& op, const LaidOutTensor& x, int di,
                           int64_t begin, int64_t size, int64_t local) {
  const Dim& d = x.shape.dim(di);
  const int64_t g = ctx.mesh().size(x.layout.mesh_axis[di]);
  const Shape windows = ReplaceDim(x.shape, di, {{d.name, g * size}});
  LaidOutTensor cut = ctx.builder.EmitLocal(LocalSliceOp(op, d.name, begin % local, size, d.name),
                                            {x}, windows, x.dtype, x.layout);
  return WholeAlong(ctx, cut, di, op);
}

}  // namespace

LaidOutTensor LowerSliceOp(LoweringContext& ctx, const v1::Op& op,
                           const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const int di = x.shape.IndexOf(op.dims(0));
  const int64_t n = x.shape.dim(di).size;
  // Validated by shape inference when the graph was built.
  const DimRange r = KeptRange(op, n).value();
  const std::string out_name = ctx.graph.type(op.name()).shape.dim(di).name;
  const int axis = x.layout.mesh_axis[di];
  if (axis == kReplicated) return LocalThenRule(ctx, op, op, {x}, di);
  const int64_t local = n / ctx.mesh().size(axis);
  if (r.size == n) {
    // The whole dim: each slice keeps its part under the new name.
    const TensorType& type = ctx.graph.type(op.name());
    LaidOutTensor out = ctx.builder.EmitLocal(LocalSliceOp(op, op.dims(0), 0, local, out_name), {x},
                                              type.shape, type.dtype, x.layout);
    return ctx.builder.Reshard(out, ctx.RuleLayout(type.shape), op.name());
  }
  const int64_t owner = r.begin / local;
  if (owner == (r.begin + r.size - 1) / local && ctx.mesh().size(axis) * r.size < n) {
    LaidOutTensor windows = GatherWindow(ctx, op, x, di, r.begin, r.size, local);
    return LocalThenRule(ctx, op, LocalSliceOp(op, op.dims(0), owner * r.size, r.size, out_name),
                         {windows}, di);
  }
  return LocalThenRule(ctx, op, op, {WholeAlong(ctx, x, di, op)}, di);
}

LaidOutTensor LowerUnstackOp(LoweringContext& ctx, const v1::Op& op,
                             const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const int di = x.shape.IndexOf(op.dims(0));
  const int axis = x.layout.mesh_axis[di];
  if (axis == kReplicated) return LocalThenRule(ctx, op, op, {x}, -1);
  const int64_t local = x.shape.dim(di).size / ctx.mesh().size(axis);
  const int64_t index = IntAttrOr(op, "index", 0);
  LaidOutTensor windows = GatherWindow(ctx, op, x, di, index, 1, local);
  v1::Op pick = op;
  (*pick.mutable_attrs())["index"].set_i(index / local);
  return LocalThenRule(ctx, op, pick, {windows}, -1);
}

LaidOutTensor LowerPadOp(LoweringContext& ctx, const v1::Op& op,
                         const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const int di = x.shape.IndexOf(op.dims(0));
  if (IntAttrOr(op, "before", 0) == 0 && IntAttrOr(op, "after", 0) == 0 &&
      x.layout.mesh_axis[di] != kReplicated) {
    // A rename: each slice keeps its part.
    const TensorType& type = ctx.graph.type(op.name());
    LaidOutTensor out = ctx.builder.EmitLocal(op, {x}, type.shape, type.dtype, x.layout);
    return ctx.builder.Reshard(out, ctx.RuleLayout(type.shape), op.name());
  }
  return LocalThenRule(ctx, op, op, {WholeAlong(ctx, x, di, op)}, di);
}

LaidOutTensor LowerConcatOp(LoweringContext& ctx, const v1::Op& op,
                            const std::vector<LaidOutTensor>& inputs) {
  std::vector<LaidOutTensor> wholes;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const std::string& dim = op.dims(op.dims_size() == 1 ? 0 : static_cast<int>(j));
    wholes.push_back(WholeAlong(ctx, inputs[j], inputs[j].shape.IndexOf(dim), op));
  }
  return LocalThenRule(ctx, op, op, wholes, inputs[0].shape.IndexOf(op.dims(0)));
}

LaidOutTensor LowerStackOp(LoweringContext& ctx, const v1::Op& op,
                           const std::vector<LaidOutTensor>& inputs) {
  const Shape& out = ctx.graph.type(op.name()).shape;
  return LocalThenRule(ctx, op, op, inputs, out.IndexOf(op.attrs().at("new_dim").s()));
}

}  // namespace meshrt
