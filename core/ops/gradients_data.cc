// Gradient rules of the reshape, data-movement and indexing families, attached to their ops'
// records (core/ops/gradient.h): each moves dy back to where its input's elements came from. one_hot,
// argmax and range are piecewise constant: zero gradient.
#include <string>
#include <vector>

#include "core/ops/gradient.h"
#include "core/ops/ops.h"
#include "core/ops/ops_data.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// reshape, rename_dim, replace_dims: a reshape back.
absl::Status ReshapeGradient(Backward& g) {
  g.Grad(0, g.b.Reshape(g.dy, g.in[0].shape));
  return g.b.status();
}

// slice, split: pad dy back to the whole dim.
absl::Status SliceGradient(Backward& g) {
  const int i = g.in[0].shape.IndexOf(g.op.dims(0));
  const Dim& d = g.in[0].shape.dim(i);
  ASSIGN_OR_RETURN(const DimRange r, KeptRange(g.op, d.size));
  g.Grad(0, g.Pad(g.dy, g.y.shape.dim(i).name, r.begin, d.size - r.begin - r.size, d.name));
  return g.b.status();
}

// The unpadded range of dy.
absl::Status PadGradient(Backward& g) {
  const int i = g.in[0].shape.IndexOf(g.op.dims(0));
  const Dim& d = g.in[0].shape.dim(i);
  g.Grad(0, g.Slice(g.dy, g.y.shape.dim(i).name, IntAttrOr(g.op, "before", 0), d.size, d.name));
  return g.b.status();
}

// Each input's range of dy.
absl::Status ConcatGradient(Backward& g) {
  const std::string& out = g.y.shape.dim(g.in[0].shape.IndexOf(g.op.dims(0))).name;
  int64_t begin = 0;
  for (size_t j = 0; j < g.in.size(); ++j) {
    const std::string& dj = g.op.dims(g.op.dims_size() == 1 ? 0 : j);
    const int64_t size = g.in[j].shape.dim(g.in[j].shape.IndexOf(dj)).size;
    g.Grad(j, g.Slice(g.dy, out, begin, size, dj));
    begin += size;
  }
  return g.b.status();
}

absl::Status StackGradient(Backward& g) {
  const std::string new_dim = StringAttrOr(g.op, "new_dim", "");
  for (size_t j = 0; j < g.in.size(); ++j) g.Grad(j, g.Unstack(g.dy, new_dim, j));
  return g.b.status();
}

// dy at position index of the dim, zeros elsewhere.
absl::Status UnstackGradient(Backward& g) {
  const Dim& d = g.in[0].shape.dim(g.in[0].shape.IndexOf(g.op.dims(0)));
  g.Grad(0, g.b.Einsum({g.dy, g.Basis(d, IntAttrOr(g.op, "index", 0))}, g.in[0].shape));
  return g.b.status();
}

// dweights[row] = sum of dy over the indices selecting it: einsum(one_hot(indices), dy) (with
// row_ids: equal(indices, row_ids)); out-of-range indices select nothing.
absl::Status GatherGradient(Backward& g) {
  const Dim& d = g.in[0].shape.dim(g.in[0].shape.IndexOf(g.op.dims(0)));
  const TensorRef sel =
      g.in.size() > 2 ? g.Binary("equal", g.in[1], g.in[2]) : g.OneHot(g.in[1], d);
  g.Grad(0, g.b.Einsum({sel, g.dy}, g.in[0].shape));
  return g.b.status();
}

// top_k, sort values: dy goes back to the positions the indices output names (indices: none).
absl::Status RankValuesGradient(Backward& g) {
  if (StringAttrOr(g.op, "output", "values") != "values") return g.b.status();
  const int i = g.in[0].shape.IndexOf(g.op.dims(0));
  const Dim& d = g.in[0].shape.dim(i);
  v1::Op indices_op = gradient::Copy(g.op);
  (*indices_op.mutable_attrs())["output"].set_s("indices");
  TensorRef indices = g.b.Apply(indices_op, {g.in[0]});  // positions (no ids)
  TensorRef dy = g.dy;
  const std::string out = g.y.shape.dim(i).name;
  if (out == d.name) {  // sort (or top_k of the whole dim): rename the output's dim
    const std::string rank = g.FreshDim(d.name + "_rank");
    indices = g.Rename(indices, out, rank);
    dy = g.Rename(dy, out, rank);
  }
  g.Grad(0, g.b.Einsum({g.OneHot(indices, d), dy}, g.in[0].shape));
  return g.b.status();
}

// dx[j] = sum of dy[i] over the i whose sums include x[j]: total - cumsum(dy) with the other
// exclusivity. carry: the total.
absl::Status CumsumGradient(Backward& g) {
  const std::string& d = g.op.dims(0);
  const TensorRef total = g.OnDims("reduce_sum", g.dy);
  v1::Op rev = gradient::Typed("cumsum");
  rev.add_dims(d);
  (*rev.mutable_attrs())["exclusive"].set_b(!BoolAttrOr(g.op, "exclusive", false));
  g.Grad(0, g.b.Neg(g.b.Sub(g.b.Apply(rev, {g.dy}), total)));
  if (g.in.size() > 1) g.Grad(1, total);
  return g.b.status();
}

const bool kRegistered = RegisterGradients({
                             {"reshape", &ReshapeGradient},
                             {"rename_dim", &ReshapeGradient},
                             {"replace_dims", &ReshapeGradient},
                             {"slice", &SliceGradient},
                             {"split", &SliceGradient},
                             {"pad", &PadGradient},
                             {"concat", &ConcatGradient},
                             {"stack", &StackGradient},
                             {"unstack", &UnstackGradient},
                             {"gather", &GatherGradient},
                             {"top_k", &RankValuesGradient},
                             {"sort", &RankValuesGradient},
                             {"cumsum", &CumsumGradient},
                         }) &&
                         RegisterZeroGradients({"one_hot", "argmax", "range"});

}  // namespace
}  // namespace meshrt
