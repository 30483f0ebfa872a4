// Lowering of conv1d/conv2d and max_pool/avg_pool (core/ops/ops_spatial.h).
//
// Convolution with a split spatial dim (the case Mesh-TensorFlow refused): when the output blocks
// line up with the input blocks — output size * stride = n (SAME padding), the stride divides the
// block b, and the padding p before and k - s - p after each fit in one block — processor p's
// outputs need exactly its block plus p positions of the previous block and k-s-p of the next.
// Those halos come from the two neighbours by permute (zeros at the ends are SAME's padding), and
// a local convolution without padding over the extended block yields the output block. For 2-D,
// the second exchange sends the already-extended rows, so corners arrive too. Any other split
// spatial dim (VALID padding, misaligned strides, windows wider than a block) is gathered first;
// with VALID the output dim is rarely divisible anyway, so it usually ends whole.
//
// Split in_channels (same split in x and filter): the local conv is a partial sum over that mesh
// dim, which Reshard resolves (allreduce, or reduce-scatter when the output layout splits a dim
// over it). Split out_channels and batch dims are local. Filter window dims are made whole.
//
// Pooling uses non-overlapping windows: a split spatial dim whose block holds whole windows
// (k divides b) pools locally into the output block; otherwise the dim is gathered first.
#include <algorithm>

#include "core/ops/lower_ops.h"
#include "core/ops/ops_spatial.h"
#include "util/status_macros.h"

namespace meshrt {
namespace spatial {

absl::StatusOr<LaidOutTensor> LowerConv(LoweringContext& ctx, const v1::Op& op,
                                        const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const LaidOutTensor& f = inputs[1];
  const TensorType& type = ctx.graph.type(op.name());
  ASSIGN_OR_RETURN(const WindowSpec spec, ConvSpec(op, x.shape, f.shape));
  const int ns = static_cast<int>(spec.x_spatial.size());

  // Which split spatial dims take halos; the others are gathered.
  TensorLayout lx = x.layout;
  std::vector<int64_t> before(ns, 0), after(ns, 0);
  std::vector<bool> halo(ns, false);
  for (int i = 0; i < ns; ++i) {
    const int d = spec.x_spatial[i];
    const int m = lx.mesh_axis[d];
    if (m == kReplicated) continue;
    const int64_t g = ctx.mesh().size(m), n = x.shape.dim(d).size, b = n / g;
    const int64_t s = spec.stride[i], k = spec.window[i], p = spec.pad_before[i];
    const int64_t next = std::max<int64_t>(0, k - s - p);
    if (g > 1 && spec.output_size[i] * s == n && b % s == 0 && p <= b && next <= b) {
      halo[i] = true;
      before[i] = p;
      after[i] = next;
    } else {
      lx.mesh_axis[d] = kReplicated;
    }
  }
  ASSIGN_OR_RETURN(LaidOutTensor xs, ctx.builder.Reshard(x, lx, op.name()));

  // The layout the local conv produces: batch dims and halo'd spatial dims as in x, out_channels
  // as its rule says unless that mesh dim is taken (then whole).
  const int in_axis = lx.mesh_axis[spec.x_in];
  TensorLayout lo{std::vector<int>(type.shape.rank(), kReplicated)};
  for (int d = 0; d < type.shape.rank(); ++d) {
    const auto sp = std::find(spec.x_spatial.begin(), spec.x_spatial.end(), d);
    if (d == spec.x_in) continue;
    if (sp == spec.x_spatial.end() || halo[sp - spec.x_spatial.begin()]) {
      lo.mesh_axis[d] = lx.mesh_axis[d];
    }
  }
  int out_axis = ctx.rules.MeshAxisFor(spec.out_channels);
  if (out_axis != kReplicated &&
      (out_axis == in_axis || std::count(lo.mesh_axis.begin(), lo.mesh_axis.end(), out_axis) > 0)) {
    out_axis = kReplicated;
  }
  lo.mesh_axis[spec.x_in] = out_axis;
  TensorLayout lf{std::vector<int>(ns + 2, kReplicated)};
  lf.mesh_axis[ns] = in_axis;
  lf.mesh_axis[ns + 1] = out_axis;
  ASSIGN_OR_RETURN(const LaidOutTensor fs, ctx.builder.Reshard(f, lf, op.name()));

  v1::Op local = op;
  v1::IntList* pad = (*local.mutable_attrs())["_pad_before"].mutable_ints();
  for (int i = 0; i < ns; ++i) {
    if (halo[i]) {
      ASSIGN_OR_RETURN(xs, ExtendWithHalo(ctx, xs, spec.x_spatial[i], before[i], after[i],
                                          /*wrap=*/false, op.name()));
    }
    pad->add_values(halo[i] ? 0 : spec.pad_before[i]);
  }
  ASSIGN_OR_RETURN(LaidOutTensor y,
                   ctx.builder.EmitLocal(local, {xs, fs}, type.shape, type.dtype, lo));
  if (in_axis != kReplicated && ctx.mesh().size(in_axis) > 1) y.partial_sum_axes = {in_axis};
  return ctx.builder.Reshard(y, ctx.RuleLayout(type.shape), op.name());
}

absl::StatusOr<LaidOutTensor> LowerPool(LoweringContext& ctx, const v1::Op& op,
                                        const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const TensorType& type = ctx.graph.type(op.name());
  ASSIGN_OR_RETURN(const WindowSpec spec, PoolSpec(op, x.shape));
  TensorLayout lx = x.layout;
  for (size_t i = 0; i < spec.x_spatial.size(); ++i) {
    const int d = spec.x_spatial[i];
    const int m = lx.mesh_axis[d];
    if (m == kReplicated) continue;
    const int64_t b = x.shape.dim(d).size / ctx.mesh().size(m);
    if (b % spec.window[i] != 0) lx.mesh_axis[d] = kReplicated;
  }
  ASSIGN_OR_RETURN(const LaidOutTensor xs, ctx.builder.Reshard(x, lx, op.name()));
  ASSIGN_OR_RETURN(const LaidOutTensor y,
                   ctx.builder.EmitLocal(op, {xs}, type.shape, type.dtype, lx));
  return ctx.builder.Reshard(y, ctx.RuleLayout(type.shape), op.name());
}

}  // namespace spatial
}  // namespace meshrt
