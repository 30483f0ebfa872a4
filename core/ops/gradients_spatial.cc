// Gradient rules of the spatial family (shift, halo_exchange, conv1d/conv2d, avg_pool/max_pool),
// attached to their ops' records (core/ops/gradient.h). Convolution taps are shifts, slices/pads and
// (strided) replace_dims + unstack, so a split spatial dim lowers as those ops do.
#include <string>
#include <vector>

#include "core/ops/gradient.h"
#include "core/ops/ops.h"
#include "core/ops/ops_data.h"  // ReplaceDim
#include "core/ops/ops_spatial.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// `shape` with dim `i` replaced by `dims`.
Shape Replaced(const Shape& shape, int i, const std::vector<Dim>& dims) {
  return ReplaceDim(shape, i, dims);
}

// Tap j of a conv along one spatial dim: x (dim d of size n) -> the positions o*s + j - p for
// each output position o (dim `out` of size O), reading 0 off x.
TensorRef ConvTap(Backward& g, TensorRef x, const std::string& d, int64_t n, const std::string& out,
                  int64_t O, int64_t s, int64_t p, int64_t j) {
  x = g.Shift(x, d, p - j, false);  // x'[i] = x[i + j - p]; the taps are x'[o*s], all < n
  const int64_t L = O * s;
  if (s == 1) {
    return L < n ? g.Slice(x, d, 0, L, out) : g.Rename(x, d, out);
  }
  std::string whole = d;
  if (L < n) {
    whole = g.FreshDim(d);
    x = g.Slice(x, d, 0, L, whole);
  } else if (L > n) {
    whole = g.FreshDim(d);
    x = g.Pad(x, d, 0, L - n, whole);
  }
  const std::string phase = g.FreshDim(d + "_phase");
  v1::Op split = gradient::Typed("replace_dims");
  split.add_dims(whole);
  *split.mutable_shape() = Shape({{out, O}, {phase, s}}).ToProto();
  return g.Unstack(g.b.Apply(split, {x}), phase, 0);
}

// The transpose of ConvTap: t (dim `out` of size O) -> a tensor with dim d (size n) holding t[o]
// at position o*s + j - p (dropped off the dim).
TensorRef ConvUntap(Backward& g, TensorRef t, const std::string& d, int64_t n,
                    const std::string& out, int64_t O, int64_t s, int64_t p, int64_t j) {
  const int64_t L = O * s;
  if (s == 1) {
    t = L < n ? g.Pad(t, out, 0, n - L, d) : g.Rename(t, out, d);
  } else {
    const int oi = t.shape.IndexOf(out);
    const std::string phase = g.FreshDim(d + "_phase");
    // t[o] at phase 0 of s (an einsum broadcast against the basis vector), then merged.
    TensorRef up =
        g.b.Einsum({t, g.Basis({phase, s}, 0)}, Replaced(t.shape, oi, {{out, O}, {phase, s}}));
    const std::string whole = L == n ? d : g.FreshDim(d);
    up = g.b.Reshape(up, Replaced(t.shape, oi, {{whole, L}}));
    // Taps sit at o*s < n, so what lies past n is zero.
    if (L < n) up = g.Pad(up, whole, 0, n - L, d);
    if (L > n) up = g.Slice(up, whole, 0, n, d);
    t = up;
  }
  return g.Shift(t, d, j - p, false);
}

// Pool upsampling along one spatial dim: t (dim `out` of size O) -> each value repeated over its
// window of k positions of d (size n); positions past O*k are 0.
TensorRef PoolUp(Backward& g, const TensorRef& t, const std::string& d, int64_t n,
                 const std::string& out, int64_t O, int64_t k) {
  if (k == 1) return O < n ? g.Pad(t, out, 0, n - O, d) : g.Rename(t, out, d);
  const int oi = t.shape.IndexOf(out);
  const std::string window = g.FreshDim(d + "_window");
  // An einsum output dim in no input is a broadcast: t repeated over the window.
  TensorRef up = g.b.Einsum({t}, Replaced(t.shape, oi, {{out, O}, {window, k}}));
  const int64_t L = O * k;
  const std::string whole = L == n ? d : g.FreshDim(d);
  up = g.b.Reshape(up, Replaced(t.shape, oi, {{whole, L}}));
  return L < n ? g.Pad(up, whole, 0, n - L, d) : up;
}

TensorRef PoolUpAll(Backward& g, TensorRef t, const spatial::WindowSpec& spec, const Shape& x) {
  for (size_t i = 0; i < spec.x_spatial.size(); ++i) {
    const Dim& d = x.dim(spec.x_spatial[i]);
    t = PoolUp(g, t, d.name, d.size, spec.output_dim[i], spec.output_size[i], spec.window[i]);
  }
  return t;
}

// By -offset.
absl::Status ShiftGradient(Backward& g) {
  g.Grad(0, g.Shift(g.dy, g.op.dims(0), -IntAttrOr(g.op, "offset", 0),
                    BoolAttrOr(g.op, "wrap", false)));
  return g.b.status();
}

// Block k of the output holds x[k-1]'s last h, x[k]'s b, x[k+1]'s first h: each part of dy goes
// back to its block (the halos by a shift of one block the other way).
absl::Status HaloExchangeGradient(Backward& g) {
  const std::string& blocks = g.op.dims(0);
  const int bi = g.in[0].shape.IndexOf(g.op.dims(1));
  const std::string& block = g.op.dims(1);
  const int64_t b = g.in[0].shape.dim(bi).size;
  const std::string out = g.y.shape.dim(bi).name;
  const int64_t h = IntAttrOr(g.op, "halo", 0);
  const bool wrap = BoolAttrOr(g.op, "wrap", false);
  TensorRef dx = g.Slice(g.dy, out, h, b, block);
  if (h > 0) {
    const std::string edge = g.FreshDim(block + "_edge");
    TensorRef left = g.Shift(g.Slice(g.dy, out, 0, h, edge), blocks, -1, wrap);
    TensorRef right = g.Shift(g.Slice(g.dy, out, h + b, h, edge), blocks, 1, wrap);
    dx = g.b.Add(dx, g.Pad(left, edge, b - h, 0, block));
    dx = g.b.Add(dx, g.Pad(right, edge, 0, b - h, block));
  }
  g.Grad(0, dx);
  return g.b.status();
}

// conv: out[o] = sum over taps j and in-channels c of x[o*s + j - p][c] f[j][c].
//   dfilter[j] = einsum(tap j of x, dy) over batch and output positions;
//   dx = sum over taps of dy . f[j] put back at the positions tap j read (ConvUntap).
absl::Status ConvGradient(Backward& g) {
  GraphBuilder& b = g.b;
  const TensorRef& dy = g.dy;
  const TensorRef& x = g.in[0];
  const TensorRef& f = g.in[1];
  ASSIGN_OR_RETURN(const spatial::WindowSpec spec, spatial::ConvSpec(g.op, x.shape, f.shape));
  const int ns = static_cast<int>(spec.x_spatial.size());
  const Dim in_ch = f.shape.dim(ns), out_ch = f.shape.dim(ns + 1);
  auto tap = [&](TensorRef t, int i, int64_t j, bool forward) {
    const Dim& d = x.shape.dim(spec.x_spatial[i]);
    return forward ? ConvTap(g, t, d.name, d.size, spec.output_dim[i], spec.output_size[i],
                             spec.stride[i], spec.pad_before[i], j)
                   : ConvUntap(g, t, d.name, d.size, spec.output_dim[i], spec.output_size[i],
                               spec.stride[i], spec.pad_before[i], j);
  };
  // dy . f[taps] has dy's dims with out_channels replaced by in_channels.
  const int oc = dy.shape.IndexOf(out_ch.name);
  const Shape gx_shape = Replaced(dy.shape, oc, {in_ch});
  std::vector<TensorRef> df_rows;  // per tap of the first window dim
  TensorRef dx;
  bool have_dx = false;
  for (int64_t j0 = 0; j0 < spec.window[0]; ++j0) {
    const TensorRef x0 = tap(x, 0, j0, true);
    const TensorRef f0 = g.Unstack(f, f.shape.dim(0).name, j0);
    std::vector<TensorRef> taps1;
    TensorRef gx0;
    bool have_gx0 = false;
    const int64_t k1 = ns > 1 ? spec.window[1] : 1;
    for (int64_t j1 = 0; j1 < k1; ++j1) {
      const TensorRef xt = ns > 1 ? tap(x0, 1, j1, true) : x0;
      const TensorRef ft = ns > 1 ? g.Unstack(f0, f.shape.dim(1).name, j1) : f0;
      taps1.push_back(b.Einsum({xt, dy}, Shape({in_ch, out_ch})));
      TensorRef gx = b.Einsum({dy, ft}, gx_shape);
      if (ns > 1) gx = tap(gx, 1, j1, false);
      gx0 = have_gx0 ? b.Add(gx0, gx) : gx;
      have_gx0 = true;
    }
    if (ns > 1) {
      v1::Op stack = gradient::Typed("stack");
      (*stack.mutable_attrs())["new_dim"].set_s(f.shape.dim(1).name);
      df_rows.push_back(b.Apply(stack, taps1));
    } else {
      df_rows.push_back(taps1[0]);
    }
    const TensorRef t = tap(gx0, 0, j0, false);
    dx = have_dx ? b.Add(dx, t) : t;
    have_dx = true;
  }
  v1::Op stack = gradient::Typed("stack");
  (*stack.mutable_attrs())["new_dim"].set_s(f.shape.dim(0).name);
  g.GradOfShape(1, g.SumTo(b.Apply(stack, df_rows), f.shape));
  g.GradOfShape(0, g.SumTo(dx, x.shape));
  return b.status();
}

// avg_pool: dy / window broadcast over each window. max_pool: dy to the elements equal to their
// window's max, shared equally among ties.
absl::Status PoolGradient(Backward& g) {
  GraphBuilder& b = g.b;
  const Shape& x = g.in[0].shape;
  ASSIGN_OR_RETURN(const spatial::WindowSpec spec, spatial::PoolSpec(g.op, x));
  int64_t window = 1;
  for (int64_t k : spec.window) window *= k;
  if (g.op.type() == "avg_pool") {
    g.Grad(0, b.Scale(PoolUpAll(g, g.dy, spec, x), 1.0f / static_cast<float>(window)));
    return b.status();
  }
  const TensorRef mask = g.Binary("equal", g.in[0], PoolUpAll(g, g.y, spec, x));
  v1::Op count = gradient::Copy(g.op);
  count.set_type("avg_pool");
  const TensorRef share = b.Div(g.dy, b.Scale(b.Apply(count, {mask}), static_cast<float>(window)));
  g.Grad(0, b.Mul(mask, PoolUpAll(g, share, spec, x)));
  return b.status();
}

const bool kRegistered = RegisterGradients({
    {"shift", &ShiftGradient},
    {"halo_exchange", &HaloExchangeGradient},
    {"conv1d", &ConvGradient},
    {"conv2d", &ConvGradient},
    {"avg_pool", &PoolGradient},
    {"max_pool", &PoolGradient},
});

}  // namespace
}  // namespace meshrt
