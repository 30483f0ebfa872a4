// SPMD lowering of the indexing family (the plan per op is in ops_index.h). Where a kernel must
// know the global positions of the elements along a split dim it does not output (gather's rows,
// top_k's and argmax's indices), the lowering hands it a `range` over that dim laid out like the
// input: each processor's range slice holds exactly its global positions.
#include <algorithm>

#include "core/ops/lower_ops.h"
#include "core/ops/ops_data.h"
#include "core/ops/ops_index.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// The global positions along dim `di` of `x`, split as `x` splits that dim (int32).
absl::StatusOr<LaidOutTensor> PositionsAlong(LoweringContext& ctx, const v1::Op& op,
                                             const LaidOutTensor& x, int di) {
  const Shape shape({x.shape.dim(di)});
  v1::Op range;
  range.set_name(op.name());
  range.set_type("range");
  *range.mutable_shape() = shape.ToProto();
  range.set_dtype(v1::DT_INT32);
  return ctx.builder.EmitLocal(range, {}, shape, DType::kInt32,
                               TensorLayout{{x.layout.mesh_axis[di]}});
}

// A local top_k standing for `op`: the k best of dim `dim`, kept under the name `dim`.
v1::Op Candidates(const v1::Op& op, const std::string& dim, int64_t k, const std::string& output) {
  v1::Op t;
  t.set_name(op.name());
  t.set_type("top_k");
  t.add_dims(dim);
  (*t.mutable_attrs())["k"].set_i(k);
  (*t.mutable_attrs())["new_dim"].set_s(dim);
  (*t.mutable_attrs())["output"].set_s(output);
  return t;
}

}  // namespace

absl::StatusOr<LaidOutTensor> LowerLocalIndexOp(LoweringContext& ctx, const v1::Op& op,
                                                const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  return ctx.builder.EmitLocal(op, inputs, type.shape, type.dtype, ctx.RuleLayout(type.shape));
}

absl::StatusOr<LaidOutTensor> LowerGatherOp(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout rule = ctx.RuleLayout(type.shape);
  const LaidOutTensor& w = inputs[0];
  const int di = w.shape.IndexOf(op.dims(0));
  const int axis = w.layout.mesh_axis[di];
  if (axis == kReplicated) return ctx.builder.EmitLocal(op, inputs, type.shape, type.dtype, rule);
  if (std::count(rule.mesh_axis.begin(), rule.mesh_axis.end(), axis) > 0) {
    // The output needs that mesh dim for one of its own dims: every processor looks up any row.
    ASSIGN_OR_RETURN(LaidOutTensor whole, WholeAlong(ctx, w, di, op));
    std::vector<LaidOutTensor> in = {whole, inputs[1]};
    if (inputs.size() == 3) {
      ASSIGN_OR_RETURN(LaidOutTensor ids, WholeAlong(ctx, inputs[2], 0, op));
      in.push_back(ids);
    }
    return ctx.builder.EmitLocal(op, in, type.shape, type.dtype, rule);
  }
  LaidOutTensor ids;
  if (inputs.size() == 3) {
    ids = inputs[2];
  } else {
    ASSIGN_OR_RETURN(ids, PositionsAlong(ctx, op, w, di));
  }
  ASSIGN_OR_RETURN(LaidOutTensor partial,
                   ctx.builder.EmitLocal(op, {w, inputs[1], ids}, type.shape, type.dtype, rule));
  return ctx.builder.AllReduce(partial, {axis}, v1::REDUCE_SUM, op.name());
}

absl::StatusOr<LaidOutTensor> LowerTopKOp(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const int di = x.shape.IndexOf(op.dims(0));
  const bool argmax = op.type() == "argmax";
  const int out_dim = argmax ? -1 : di;
  const int axis = x.layout.mesh_axis[di];
  if (axis == kReplicated) return LocalThenRule(ctx, op, op, inputs, out_dim);
  // Candidates: each slice's best min(k, local) with their ids, gathered along the dim.
  const int64_t g = ctx.mesh().size(axis), local = x.shape.dim(di).size / g;
  const int64_t k = std::min<int64_t>(argmax ? 1 : IntAttrOr(op, "k", 1), local);
  const Shape cand = ReplaceDim(x.shape, di, {{op.dims(0), g * k}});
  ASSIGN_OR_RETURN(
      LaidOutTensor values,
      ctx.builder.EmitLocal(Candidates(op, op.dims(0), k, "values"), {x}, cand, x.dtype, x.layout));
  ASSIGN_OR_RETURN(LaidOutTensor all_values, WholeAlong(ctx, values, di, op));
  std::vector<LaidOutTensor> finals = {all_values};
  const bool want_ids = argmax || StringAttrOr(op, "output", "values") == "indices";
  if (want_ids) {
    LaidOutTensor ids;
    if (inputs.size() == 2) {
      ids = inputs[1];
    } else {
      ASSIGN_OR_RETURN(ids, PositionsAlong(ctx, op, x, di));
    }
    ASSIGN_OR_RETURN(LaidOutTensor indices,
                     ctx.builder.EmitLocal(Candidates(op, op.dims(0), k, "indices"), {x, ids}, cand,
                                           DType::kInt32, x.layout));
    ASSIGN_OR_RETURN(LaidOutTensor all_indices, WholeAlong(ctx, indices, di, op));
    finals.push_back(all_indices);
  }
  return LocalThenRule(ctx, op, op, finals, out_dim);
}

absl::StatusOr<LaidOutTensor> LowerCumsumOp(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  const LaidOutTensor& x = inputs[0];
  const int di = x.shape.IndexOf(op.dims(0));
  const int axis = x.layout.mesh_axis[di];
  if (axis == kReplicated) {
    return ctx.builder.EmitLocal(op, inputs, type.shape, type.dtype, x.layout);
  }
  const int64_t g = ctx.mesh().size(axis), local = x.shape.dim(di).size / g;
  // Each slice's total (the last element of its inclusive cumsum), one per slice and row.
  v1::Op inclusive;
  inclusive.set_name(op.name());
  inclusive.set_type("cumsum");
  inclusive.add_dims(op.dims(0));
  ASSIGN_OR_RETURN(LaidOutTensor sums,
                   ctx.builder.EmitLocal(inclusive, {x}, x.shape, x.dtype, x.layout));
  const Shape per_slice = ReplaceDim(x.shape, di, {{op.dims(0), g}});
  ASSIGN_OR_RETURN(LaidOutTensor totals,
                   ctx.builder.EmitLocal(LocalSliceOp(op, op.dims(0), local - 1, 1, op.dims(0)),
                                         {sums}, per_slice, x.dtype, x.layout));
  // The carry of slice r: the user's carry plus the totals of slices before r.
  ASSIGN_OR_RETURN(LaidOutTensor all, WholeAlong(ctx, totals, di, op));
  v1::Op prefix = inclusive;
  (*prefix.mutable_attrs())["exclusive"].set_b(true);
  std::vector<LaidOutTensor> prefix_in = {all};
  if (inputs.size() == 2) prefix_in.push_back(inputs[1]);
  ASSIGN_OR_RETURN(LaidOutTensor carries,
                   ctx.builder.EmitLocal(prefix, prefix_in, all.shape, x.dtype, all.layout));
  ASSIGN_OR_RETURN(LaidOutTensor carry,
                   ctx.builder.Reshard(carries, x.layout, op.name()));  // local slice
  return ctx.builder.EmitLocal(op, {x, carry}, type.shape, type.dtype, x.layout);
}

absl::StatusOr<LaidOutTensor> LowerSortOp(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs) {
  const int di = inputs[0].shape.IndexOf(op.dims(0));
  ASSIGN_OR_RETURN(LaidOutTensor whole, WholeAlong(ctx, inputs[0], di, op));
  return LocalThenRule(ctx, op, op, {whole}, di);
}

}  // namespace meshrt
