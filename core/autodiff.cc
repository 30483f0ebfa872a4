#include "core/autodiff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/graph.h"
#include "core/ops_data.h"
#include "core/ops_spatial.h"
#include "core/status_macros.h"

namespace meshrt {
namespace {

const std::set<std::string>& Rules() {
  static const auto* rules = new std::set<std::string>{
      // elementwise
      "add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "scale", "relu", "abs",
      "exp", "log", "sqrt", "rsqrt", "reciprocal", "square", "tanh", "sigmoid", "gelu", "cast",
      "where", "dropout",
      // einsum and reductions, normalisations
      "einsum", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_logsumexp",
      "softmax", "log_softmax", "softmax_cross_entropy", "layer_norm", "rms_norm",
      // reshapes and data movement
      "reshape", "rename_dim", "replace_dims", "slice", "pad", "concat", "split", "stack",
      "unstack",
      // indexing
      "gather", "top_k", "sort", "cumsum",
      // spatial
      "shift", "halo_exchange", "conv1d", "conv2d", "max_pool", "avg_pool"};
  return *rules;
}

// Ops whose output is piecewise constant in their inputs: they pass back no gradient (zero), so a
// mask made from x (e.g. greater(x, 0) * x) does not stop differentiation.
const std::set<std::string>& ZeroGradient() {
  static const auto* ops = new std::set<std::string>{
      "equal", "less", "greater", "logical_and", "logical_or", "sign",
      "one_hot", "argmax", "reduce_any", "reduce_all", "range"};
  return *ops;
}

v1::Op Typed(const std::string& type) {
  v1::Op op;
  op.set_type(type);
  return op;
}

v1::Op WithScalar(const std::string& type, float scalar, bool scalar_first = false) {
  v1::Op op = Typed(type);
  (*op.mutable_attrs())["scalar"].set_f(scalar);
  if (scalar_first) (*op.mutable_attrs())["scalar_first"].set_b(true);
  return op;
}

// An op of `type` over the same `dims` as `like` (the normalised dims of a softmax).
v1::Op WithDims(const std::string& type, const v1::Op& like) {
  v1::Op op = Typed(type);
  *op.mutable_dims() = like.dims();
  return op;
}

// `op` without its name and inputs, to apply again to other inputs (Apply sets both).
v1::Op Copy(const v1::Op& op) {
  v1::Op c = op;
  c.clear_name();
  c.clear_inputs();
  return c;
}

bool HasScalar(const v1::Op& op) { return op.attrs().count("scalar") > 0; }

// Whether every dim of `s` is one of `op`'s dims.
bool OnlyDimsOf(const Shape& s, const v1::Op& op) {
  for (const Dim& d : s.dims()) {
    if (std::find(op.dims().begin(), op.dims().end(), d.name) == op.dims().end()) return false;
  }
  return true;
}

float Scalar(const v1::Op& op) {
  const v1::AttrValue& v = op.attrs().at("scalar");
  return v.value_case() == v1::AttrValue::kF ? v.f() : static_cast<float>(v.i());
}

bool ScalarFirst(const v1::Op& op) { return BoolAttrOr(op, "scalar_first", false); }

// `shape` with dim `i` replaced by `dims`.
Shape Replaced(const Shape& shape, int i, const std::vector<Dim>& dims) {
  return ReplaceDim(shape, i, dims);
}

class Differentiator {
 public:
  Differentiator(GraphBuilder& b, const Graph& graph) : b_(b), graph_(graph) {
    for (int i = 0; i < graph.proto().ops_size(); ++i) {
      for (const Dim& d : graph.type(graph.op(i).name()).shape.dims()) used_dims_.insert(d.name);
    }
  }

  TensorRef Ref(const std::string& name) {
    const TensorType& t = graph_.type(name);
    return TensorRef{name, t.shape, t.dtype};
  }

  // dy summed to `shape` (over dims it lacks) and in its dim order.
  TensorRef SumTo(const TensorRef& dy, const Shape& shape) {
    if (dy.shape == shape) return dy;
    return b_.Einsum({dy}, shape);
  }

  // Integer tensors (indices, conditions, int casts) take no gradient.
  void AddGrad(const std::string& name, const TensorRef& g) {
    if (graph_.type(name).dtype != DType::kFloat32) return;
    auto it = grads_.find(name);
    if (it == grads_.end()) {
      grads_[name] = g;
    } else {
      it->second = b_.Add(it->second, g);
    }
  }

  // A dim name no tensor of the forward graph uses (for temporaries of the gradient ops).
  std::string FreshDim(const std::string& base) {
    std::string name;
    do {
      name = absl::StrCat(base, "_grad", fresh_++);
    } while (used_dims_.count(name));
    used_dims_.insert(name);
    return name;
  }

  // ---- builders of the ops the rules use ------------------------------------------------------

  TensorRef Unary(const std::string& type, const TensorRef& x) { return b_.Apply(Typed(type), {x}); }
  TensorRef Binary(const std::string& type, const TensorRef& x, const TensorRef& y) {
    return b_.Apply(Typed(type), {x, y});
  }
  TensorRef WithS(const std::string& type, const TensorRef& x, float s, bool first = false) {
    return b_.Apply(WithScalar(type, s, first), {x});
  }
  TensorRef OnDims(const std::string& type, const v1::Op& like, const TensorRef& x) {
    return b_.Apply(WithDims(type, like), {x});
  }
  TensorRef DimOp(const std::string& type, const TensorRef& x, const std::string& dim,
                  const std::map<std::string, int64_t>& ints, const std::string& new_dim = "") {
    v1::Op op = Typed(type);
    op.add_dims(dim);
    for (const auto& [k, v] : ints) (*op.mutable_attrs())[k].set_i(v);
    if (!new_dim.empty()) (*op.mutable_attrs())["new_dim"].set_s(new_dim);
    return b_.Apply(op, {x});
  }
  // Elements [begin, begin + size) of `dim`, named `new_dim`.
  TensorRef Slice(const TensorRef& x, const std::string& dim, int64_t begin, int64_t size,
                  const std::string& new_dim) {
    return DimOp("slice", x, dim, {{"begin", begin}, {"size", size}}, new_dim);
  }
  TensorRef Pad(const TensorRef& x, const std::string& dim, int64_t before, int64_t after,
                const std::string& new_dim) {
    return DimOp("pad", x, dim, {{"before", before}, {"after", after}}, new_dim);
  }
  TensorRef Shift(const TensorRef& x, const std::string& dim, int64_t offset, bool wrap) {
    if (offset == 0) return x;
    v1::Op op = Typed("shift");
    op.add_dims(dim);
    (*op.mutable_attrs())["offset"].set_i(offset);
    if (wrap) (*op.mutable_attrs())["wrap"].set_b(true);
    return b_.Apply(op, {x});
  }
  TensorRef Unstack(const TensorRef& x, const std::string& dim, int64_t index) {
    return DimOp("unstack", x, dim, {{"index", index}});
  }
  TensorRef Rename(const TensorRef& x, const std::string& from, const std::string& to) {
    return from == to ? x : b_.RenameDim(x, from, to);
  }
  TensorRef OneHot(const TensorRef& indices, const Dim& depth) {
    v1::Op op = Typed("one_hot");
    *op.mutable_shape() = Shape({depth}).ToProto();
    return b_.Apply(op, {indices});
  }
  TensorRef Zeros(const Shape& shape) {
    v1::Op op = Typed("zeros");
    *op.mutable_shape() = shape.ToProto();
    return b_.Apply(op, {});
  }
  // 1 at `index` of a vector over `dim`, else 0.
  TensorRef Basis(const Dim& dim, int64_t index) {
    std::vector<float> v(dim.size, 0.0f);
    v[index] = 1.0f;
    return b_.Constant(Tensor::Float(Shape({dim}), v));
  }

  // ---- spatial helpers ------------------------------------------------------------------------

  // Tap j of a conv along spatial dim i: x (dim d of size n) -> the positions o*s + j - p for each
  // output position o (dim `out` of size O), reading 0 off x.
  TensorRef ConvTap(TensorRef x, const std::string& d, int64_t n, const std::string& out,
                    int64_t O, int64_t s, int64_t p, int64_t j) {
    x = Shift(x, d, p - j, false);  // x'[i] = x[i + j - p]; the taps are x'[o*s], all < n
    const int64_t L = O * s;
    if (s == 1) {
      return L < n ? Slice(x, d, 0, L, out) : Rename(x, d, out);
    }
    std::string whole = d;
    if (L < n) {
      whole = FreshDim(d);
      x = Slice(x, d, 0, L, whole);
    } else if (L > n) {
      whole = FreshDim(d);
      x = Pad(x, d, 0, L - n, whole);
    }
    const std::string phase = FreshDim(d + "_phase");
    v1::Op split = Typed("replace_dims");
    split.add_dims(whole);
    *split.mutable_shape() = Shape({{out, O}, {phase, s}}).ToProto();
    return Unstack(b_.Apply(split, {x}), phase, 0);
  }

  // The transpose of ConvTap: g (dim `out` of size O) -> a tensor with dim d (size n) holding
  // g[o] at position o*s + j - p (dropped off the dim).
  TensorRef ConvUntap(TensorRef g, const std::string& d, int64_t n, const std::string& out,
                      int64_t O, int64_t s, int64_t p, int64_t j) {
    const int64_t L = O * s;
    if (s == 1) {
      g = L < n ? Pad(g, out, 0, n - L, d) : Rename(g, out, d);
    } else {
      const int oi = g.shape.IndexOf(out);
      const std::string phase = FreshDim(d + "_phase");
      // g[o] at phase 0 of s (an einsum broadcast against the basis vector), then merged.
      TensorRef up = b_.Einsum({g, Basis({phase, s}, 0)},
                               Replaced(g.shape, oi, {{out, O}, {phase, s}}));
      const std::string whole = L == n ? d : FreshDim(d);
      up = b_.Reshape(up, Replaced(g.shape, oi, {{whole, L}}));
      // Taps sit at o*s < n, so what lies past n is zero.
      if (L < n) up = Pad(up, whole, 0, n - L, d);
      if (L > n) up = Slice(up, whole, 0, n, d);
      g = up;
    }
    return Shift(g, d, j - p, false);
  }

  // Pool upsampling along spatial dim i: t (dim `out` of size O) -> each value repeated over its
  // window of k positions of d (size n); positions past O*k are 0.
  TensorRef PoolUp(const TensorRef& t, const std::string& d, int64_t n, const std::string& out,
                   int64_t O, int64_t k) {
    if (k == 1) return O < n ? Pad(t, out, 0, n - O, d) : Rename(t, out, d);
    const int oi = t.shape.IndexOf(out);
    const std::string window = FreshDim(d + "_window");
    // An einsum output dim in no input is a broadcast: t repeated over the window.
    TensorRef up = b_.Einsum({t}, Replaced(t.shape, oi, {{out, O}, {window, k}}));
    const int64_t L = O * k;
    const std::string whole = L == n ? d : FreshDim(d);
    up = b_.Reshape(up, Replaced(t.shape, oi, {{whole, L}}));
    return L < n ? Pad(up, whole, 0, n - L, d) : up;
  }

  TensorRef PoolUpAll(TensorRef t, const spatial::WindowSpec& spec, const Shape& x) {
    for (size_t i = 0; i < spec.x_spatial.size(); ++i) {
      const Dim& d = x.dim(spec.x_spatial[i]);
      t = PoolUp(t, d.name, d.size, spec.output_dim[i], spec.output_size[i], spec.window[i]);
    }
    return t;
  }

  // ---- the rules --------------------------------------------------------------------------------

  absl::Status Backprop(const v1::Op& op, const TensorRef& dy) {
    const std::string& t = op.type();
    const TensorRef y = Ref(op.name());
    std::vector<TensorRef> in;
    for (const std::string& name : op.inputs()) in.push_back(Ref(name));
    auto grad = [&](int i, const TensorRef& g) {
      if (in[i].dtype != DType::kFloat32) return;
      AddGrad(op.inputs(i), SumTo(g, in[i].shape));
    };
    if (t == "einsum") {
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].dtype != DType::kFloat32) continue;
        std::vector<TensorRef> factors = {dy};
        for (size_t j = 0; j < in.size(); ++j) {
          if (j != i) factors.push_back(in[j]);
        }
        AddGrad(op.inputs(i), b_.Einsum(factors, in[i].shape));
      }
    } else if (t == "scale") {
      grad(0, b_.Scale(dy, Scalar(op)));
    } else if (HasScalar(op) && t != "where") {
      // x op s, or s op x with scalar_first.
      const float s = Scalar(op);
      const bool first = ScalarFirst(op);
      if (t == "add") {
        grad(0, dy);
      } else if (t == "sub") {
        grad(0, first ? b_.Neg(dy) : dy);
      } else if (t == "mul") {
        grad(0, b_.Scale(dy, s));
      } else if (t == "div") {  // x / s: dy / s;  s / x: -dy s / x^2 = -dy y / x
        grad(0, first ? b_.Neg(b_.Mul(dy, b_.Div(y, in[0]))) : b_.Scale(dy, 1.0f / s));
      } else if (t == "pow") {  // x^s: dy s x^(s-1);  s^x: dy y ln(s)
        grad(0, first ? b_.Scale(b_.Mul(dy, y), std::log(s))
                      : b_.Mul(dy, b_.Scale(WithS("pow", in[0], s - 1.0f), s)));
      } else if (t == "maximum" || t == "minimum") {  // max(x, s): dy where x >= s (ties: x)
        const TensorRef other = WithS(t == "maximum" ? "less" : "greater", in[0], s);
        grad(0, b_.Sub(dy, b_.Mul(dy, other)));
      } else {
        return absl::UnimplementedError(absl::StrCat("no gradient for op '", op.name(), "' (", t,
                                                     " with a scalar operand)"));
      }
    } else if (t == "add") {
      grad(0, dy);
      grad(1, dy);
    } else if (t == "sub") {
      grad(0, dy);
      grad(1, b_.Neg(dy));
    } else if (t == "mul") {
      if (in[0].dtype == DType::kFloat32) {
        for (int i = 0; i < 2; ++i) {
          // An input with every dim of the output takes dy * other elementwise; a broadcast one
          // sums that product over the dims it lacks, which is an einsum.
          if (in[i].shape.rank() == dy.shape.rank()) {
            grad(i, b_.Mul(dy, in[1 - i]));
          } else {
            AddGrad(op.inputs(i), b_.Einsum({dy, in[1 - i]}, in[i].shape));
          }
        }
      }
    } else if (t == "div") {  // d/dx = 1/y, d/dy = -x/y^2 = -out/y
      grad(0, b_.Div(dy, in[1]));
      grad(1, b_.Neg(b_.Mul(dy, b_.Div(y, in[1]))));
    } else if (t == "pow") {  // d/dx = y x^(y-1); d/dy = out ln(x) (0 where x <= 0)
      if (in[0].dtype == DType::kFloat32) {
        grad(0, b_.Mul(dy, b_.Mul(in[1], Binary("pow", in[0], WithS("sub", in[1], 1.0f)))));
        TensorRef ln = b_.Apply(WithScalar("where", 0.0f),
                                {WithS("greater", in[0], 0.0f), b_.Apply(Typed("log"), {in[0]})});
        grad(1, b_.Mul(dy, b_.Mul(y, ln)));
      }
    } else if (t == "maximum" || t == "minimum") {
      // y takes dy where it wins strictly, x elsewhere (ties go to x): a subgradient.
      const TensorRef y_wins = Binary(t == "maximum" ? "less" : "greater", in[0], in[1]);
      const TensorRef to_y = b_.Mul(dy, y_wins);
      grad(0, b_.Sub(dy, to_y));
      grad(1, to_y);
    } else if (t == "where") {
      // where(c, x, y): x gets dy where c, y elsewhere; c (a condition) gets none.
      const TensorRef to_x = b_.Apply(WithScalar("where", 0.0f), {in[0], dy});
      grad(1, to_x);
      if (!HasScalar(op)) grad(2, b_.Apply(Typed("where"), {in[0], Zeros(dy.shape), dy}));
    } else if (t == "neg") {
      grad(0, b_.Neg(dy));
    } else if (t == "relu") {
      grad(0, b_.Mul(dy, WithS("greater", in[0], 0.0f)));
    } else if (t == "abs") {
      grad(0, b_.Mul(dy, Unary("sign", in[0])));
    } else if (t == "exp") {
      grad(0, b_.Mul(dy, y));
    } else if (t == "log") {
      grad(0, b_.Div(dy, in[0]));
    } else if (t == "sqrt") {
      grad(0, b_.Div(dy, b_.Scale(y, 2.0f)));
    } else if (t == "rsqrt") {  // -1/2 x^(-3/2) = -y^3 / 2
      grad(0, b_.Scale(b_.Mul(dy, b_.Mul(y, Unary("square", y))), -0.5f));
    } else if (t == "reciprocal") {  // -1/x^2 = -y^2
      grad(0, b_.Neg(b_.Mul(dy, Unary("square", y))));
    } else if (t == "square") {
      grad(0, b_.Mul(dy, b_.Scale(in[0], 2.0f)));
    } else if (t == "tanh") {  // 1 - y^2
      grad(0, b_.Mul(dy, WithS("sub", Unary("square", y), 1.0f, true)));
    } else if (t == "sigmoid") {  // y (1 - y)
      grad(0, b_.Mul(dy, b_.Mul(y, WithS("sub", y, 1.0f, true))));
    } else if (t == "gelu") {
      const TensorRef& x = in[0];
      TensorRef d;
      if (BoolAttrOr(op, "approximate", true)) {
        // 0.5 x (1 + tanh(u)), u = c (x + a x^3): 0.5 (1 + th) + 0.5 x (1 - th^2) c (1 + 3a x^2)
        const float c = 0.7978845608028654f, a = 0.044715f;
        const TensorRef x2 = Unary("square", x);
        const TensorRef u = b_.Scale(b_.Add(x, b_.Mul(x, b_.Scale(x2, a))), c);
        const TensorRef th = Unary("tanh", u);
        const TensorRef du = WithS("add", b_.Scale(x2, 3.0f * a * c), c);
        const TensorRef sech2 = WithS("sub", Unary("square", th), 1.0f, true);
        d = b_.Add(b_.Scale(WithS("add", th, 1.0f), 0.5f),
                   b_.Mul(b_.Scale(x, 0.5f), b_.Mul(sech2, du)));
      } else {
        // x Phi(x): Phi(x) + x phi(x). Phi = gelu(x) / x away from 0 (exact to float rounding),
        // 1/2 + x phi(0) near it (error below x^3 / 15).
        const TensorRef far = WithS("greater", Unary("abs", x), 1e-3f);
        const TensorRef near = WithS("add", b_.Scale(x, 0.3989422804014327f), 0.5f);
        const TensorRef cdf = b_.Apply(Typed("where"), {far, b_.Div(y, x), near});
        const TensorRef pdf =
            b_.Scale(b_.Exp(b_.Scale(Unary("square", x), -0.5f)), 0.3989422804014327f);
        d = b_.Add(cdf, b_.Mul(x, pdf));
      }
      grad(0, b_.Mul(dy, d));
    } else if (t == "cast") {  // float -> float: the identity (int in or out: no gradient)
      grad(0, dy);
    } else if (t == "dropout") {
      // The same mask: a dropout of dy keyed on this op's stream (its name unless set).
      v1::Op mask = Copy(op);
      (*mask.mutable_attrs())["stream"].set_s(StringAttrOr(op, "stream", op.name()));
      grad(0, b_.Apply(mask, {dy}));
    } else if (t == "reduce_sum") {
      grad(0, b_.Einsum({dy}, in[0].shape));
    } else if (t == "reduce_mean") {
      const double count = static_cast<double>(in[0].shape.num_elements()) /
                           std::max<int64_t>(1, y.shape.num_elements());
      grad(0, b_.Scale(b_.Einsum({dy}, in[0].shape), static_cast<float>(1.0 / count)));
    } else if (t == "reduce_max" || t == "reduce_min") {
      // dy shared equally by the elements equal to the extreme (one, away from ties).
      const TensorRef mask = Binary("equal", in[0], y);
      const TensorRef count = OnDims("reduce_sum", op, mask);
      grad(0, b_.Mul(mask, b_.Div(dy, count)));
    } else if (t == "reduce_logsumexp") {  // dy softmax(x) = dy exp(x - y)
      grad(0, b_.Mul(b_.Exp(b_.Sub(in[0], y)), dy));
    } else if (t == "softmax") {  // y (dy - sum_D(dy y))
      if (dy.shape == y.shape) {  // one fused op (softmax_grad)
        grad(0, b_.Apply(WithDims("softmax_grad", op), {y, dy}));
      } else {
        TensorRef s = OnDims("reduce_sum", op, b_.Mul(dy, y));
        grad(0, b_.Mul(y, b_.Sub(dy, s)));
      }
    } else if (t == "log_softmax") {  // dy - exp(y) sum_D(dy)
      TensorRef s = OnDims("reduce_sum", op, dy);
      grad(0, b_.Sub(dy, b_.Mul(b_.Exp(y), s)));
    } else if (t == "softmax_cross_entropy") {
      // loss = -sum_D t log_softmax(l): dl = dy (softmax(l) sum_D(t) - t), dt = -dy log_softmax(l)
      TensorRef p = OnDims("softmax", op, in[0]);
      TensorRef mass = OnDims("reduce_sum", op, in[1]);
      grad(0, b_.Mul(dy, b_.Sub(b_.Mul(p, mass), in[1])));
      grad(1, b_.Neg(b_.Mul(dy, OnDims("log_softmax", op, in[0]))));
    } else if (t == "layer_norm" || t == "rms_norm") {
      // xhat = (x - mean) r (layer_norm) or x r (rms_norm), r = rsqrt(mean_D(xc^2) + eps),
      // y = xhat scale + bias. With g = dy scale:
      //   layer_norm dx = r (g - mean_D(g) - xhat mean_D(g xhat)); rms_norm drops mean_D(g).
      const bool layer = t == "layer_norm";
      const float eps = FloatAttrOr(op, "epsilon", 1e-6f);
      if (dy.shape == in[0].shape && (in.size() < 2 || OnlyDimsOf(in[1].shape, op))) {
        // Fused: dx is one op (layer_norm_grad / rms_norm_grad) and xhat, for dscale, is the
        // forward op without scale and bias. The grad op reads one scale vector per row, so it
        // takes a scale over normalised dims only (any other scale: the primitive chain below).
        v1::Op dx = WithDims(t + "_grad", op);
        (*dx.mutable_attrs())["epsilon"].set_f(eps);
        if (in.size() > 1) {
          v1::Op normalise = WithDims(t, op);
          (*normalise.mutable_attrs())["epsilon"].set_f(eps);
          grad(1, b_.Mul(dy, b_.Apply(normalise, {in[0]})));
        }
        if (in.size() > 2) grad(2, dy);
        std::vector<TensorRef> dx_in = {in[0], dy};
        if (in.size() > 1) dx_in.insert(dx_in.begin() + 1, in[1]);
        grad(0, b_.Apply(dx, dx_in));
      } else {
        const TensorRef xc = layer ? b_.Sub(in[0], OnDims("reduce_mean", op, in[0])) : in[0];
        const TensorRef r =
            Unary("rsqrt", WithS("add", OnDims("reduce_mean", op, Unary("square", xc)), eps));
        const TensorRef xhat = b_.Mul(xc, r);
        TensorRef g = dy;
        if (in.size() > 1) {
          grad(1, b_.Mul(dy, xhat));
          g = b_.Mul(dy, in[1]);
        }
        if (in.size() > 2) grad(2, dy);
        TensorRef c = b_.Mul(xhat, OnDims("reduce_mean", op, b_.Mul(g, xhat)));
        if (layer) c = b_.Add(c, OnDims("reduce_mean", op, g));
        grad(0, b_.Mul(b_.Sub(g, c), r));
      }
    } else if (t == "reshape" || t == "rename_dim" || t == "replace_dims") {
      grad(0, b_.Reshape(dy, in[0].shape));
    } else if (t == "slice" || t == "split") {  // pad dy back to the whole dim
      const int i = in[0].shape.IndexOf(op.dims(0));
      const Dim& d = in[0].shape.dim(i);
      ASSIGN_OR_RETURN(const DimRange r, KeptRange(op, d.size));
      grad(0, Pad(dy, y.shape.dim(i).name, r.begin, d.size - r.begin - r.size, d.name));
    } else if (t == "pad") {  // the unpadded range of dy
      const int i = in[0].shape.IndexOf(op.dims(0));
      const Dim& d = in[0].shape.dim(i);
      grad(0, Slice(dy, y.shape.dim(i).name, IntAttrOr(op, "before", 0), d.size, d.name));
    } else if (t == "concat") {  // each input's range of dy
      const std::string& out = y.shape.dim(in[0].shape.IndexOf(op.dims(0))).name;
      int64_t begin = 0;
      for (size_t j = 0; j < in.size(); ++j) {
        const std::string& dj = op.dims(op.dims_size() == 1 ? 0 : j);
        const int64_t size = in[j].shape.dim(in[j].shape.IndexOf(dj)).size;
        grad(j, Slice(dy, out, begin, size, dj));
        begin += size;
      }
    } else if (t == "stack") {
      const std::string new_dim = StringAttrOr(op, "new_dim", "");
      for (size_t j = 0; j < in.size(); ++j) grad(j, Unstack(dy, new_dim, j));
    } else if (t == "unstack") {  // dy at position index of the dim, zeros elsewhere
      const Dim& d = in[0].shape.dim(in[0].shape.IndexOf(op.dims(0)));
      grad(0, b_.Einsum({dy, Basis(d, IntAttrOr(op, "index", 0))}, in[0].shape));
    } else if (t == "gather") {
      // dweights[row] = sum of dy over the indices selecting it: einsum(one_hot(indices), dy)
      // (with row_ids: equal(indices, row_ids)); out-of-range indices select nothing.
      const Dim& d = in[0].shape.dim(in[0].shape.IndexOf(op.dims(0)));
      const TensorRef sel = in.size() > 2 ? Binary("equal", in[1], in[2]) : OneHot(in[1], d);
      grad(0, b_.Einsum({sel, dy}, in[0].shape));
    } else if (t == "top_k" || t == "sort") {
      // Values: dy goes back to the positions the indices output names.
      if (StringAttrOr(op, "output", "values") == "values") {
        const int i = in[0].shape.IndexOf(op.dims(0));
        const Dim& d = in[0].shape.dim(i);
        v1::Op indices_op = Copy(op);
        (*indices_op.mutable_attrs())["output"].set_s("indices");
        TensorRef indices = b_.Apply(indices_op, {in[0]});  // positions (no ids)
        TensorRef g = dy;
        const std::string out = y.shape.dim(i).name;
        if (out == d.name) {  // sort (or top_k of the whole dim): rename the output's dim
          const std::string rank = FreshDim(d.name + "_rank");
          indices = Rename(indices, out, rank);
          g = Rename(g, out, rank);
        }
        grad(0, b_.Einsum({OneHot(indices, d), g}, in[0].shape));
      }
    } else if (t == "cumsum") {
      // dx[j] = sum of dy[i] over the i whose sums include x[j]: total - cumsum(dy) with the
      // other exclusivity. carry: the total.
      const std::string& d = op.dims(0);
      const TensorRef total = OnDims("reduce_sum", op, dy);
      v1::Op rev = Typed("cumsum");
      rev.add_dims(d);
      (*rev.mutable_attrs())["exclusive"].set_b(!BoolAttrOr(op, "exclusive", false));
      grad(0, b_.Neg(b_.Sub(b_.Apply(rev, {dy}), total)));
      if (in.size() > 1) grad(1, total);
    } else if (t == "shift") {
      grad(0, Shift(dy, op.dims(0), -IntAttrOr(op, "offset", 0), BoolAttrOr(op, "wrap", false)));
    } else if (t == "halo_exchange") {
      // Block k of the output holds x[k-1]'s last h, x[k]'s b, x[k+1]'s first h: each part of
      // dy goes back to its block (the halos by a shift of one block the other way).
      const std::string& blocks = op.dims(0);
      const int bi = in[0].shape.IndexOf(op.dims(1));
      const std::string& block = op.dims(1);
      const int64_t b = in[0].shape.dim(bi).size;
      const std::string out = y.shape.dim(bi).name;
      const int64_t h = IntAttrOr(op, "halo", 0);
      const bool wrap = BoolAttrOr(op, "wrap", false);
      TensorRef g = Slice(dy, out, h, b, block);
      if (h > 0) {
        const std::string edge = FreshDim(block + "_edge");
        TensorRef left = Shift(Slice(dy, out, 0, h, edge), blocks, -1, wrap);
        TensorRef right = Shift(Slice(dy, out, h + b, h, edge), blocks, 1, wrap);
        g = b_.Add(g, Pad(left, edge, b - h, 0, block));
        g = b_.Add(g, Pad(right, edge, 0, b - h, block));
      }
      grad(0, g);
    } else if (t == "conv1d" || t == "conv2d") {
      RETURN_IF_ERROR(ConvGrad(op, dy, in));
    } else if (t == "avg_pool" || t == "max_pool") {
      ASSIGN_OR_RETURN(const spatial::WindowSpec spec, spatial::PoolSpec(op, in[0].shape));
      int64_t window = 1;
      for (int64_t k : spec.window) window *= k;
      if (t == "avg_pool") {
        grad(0, b_.Scale(PoolUpAll(dy, spec, in[0].shape), 1.0f / static_cast<float>(window)));
      } else {
        // dy to the elements equal to their window's max, shared equally among ties.
        const TensorRef mask = Binary("equal", in[0], PoolUpAll(y, spec, in[0].shape));
        v1::Op count = Copy(op);
        count.set_type("avg_pool");
        const TensorRef share =
            b_.Div(dy, b_.Scale(b_.Apply(count, {mask}), static_cast<float>(window)));
        grad(0, b_.Mul(mask, PoolUpAll(share, spec, in[0].shape)));
      }
    } else {
      return absl::UnimplementedError(
          absl::StrCat("no gradient yet for op '", op.name(), "' (", t, ")"));
    }
    return b_.status();
  }

  // conv: out[o] = sum over taps j and in-channels c of x[o*s + j - p][c] f[j][c].
  //   dfilter[j] = einsum(tap j of x, dy) over batch and output positions;
  //   dx = sum over taps of dy . f[j] put back at the positions tap j read (ConvUntap).
  // Taps are shifts, slices/pads and (strided) replace_dims + unstack, so a split spatial dim
  // lowers as those ops do.
  absl::Status ConvGrad(const v1::Op& op, const TensorRef& dy, const std::vector<TensorRef>& in) {
    const TensorRef& x = in[0];
    const TensorRef& f = in[1];
    ASSIGN_OR_RETURN(const spatial::WindowSpec spec, spatial::ConvSpec(op, x.shape, f.shape));
    const int ns = static_cast<int>(spec.x_spatial.size());
    const Dim in_ch = f.shape.dim(ns), out_ch = f.shape.dim(ns + 1);
    auto tap = [&](TensorRef t, int i, int64_t j, bool forward) {
      const Dim& d = x.shape.dim(spec.x_spatial[i]);
      return forward ? ConvTap(t, d.name, d.size, spec.output_dim[i], spec.output_size[i],
                               spec.stride[i], spec.pad_before[i], j)
                     : ConvUntap(t, d.name, d.size, spec.output_dim[i], spec.output_size[i],
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
      const TensorRef f0 = Unstack(f, f.shape.dim(0).name, j0);
      std::vector<TensorRef> taps1;
      TensorRef gx0;
      bool have_gx0 = false;
      const int64_t k1 = ns > 1 ? spec.window[1] : 1;
      for (int64_t j1 = 0; j1 < k1; ++j1) {
        const TensorRef xt = ns > 1 ? tap(x0, 1, j1, true) : x0;
        const TensorRef ft = ns > 1 ? Unstack(f0, f.shape.dim(1).name, j1) : f0;
        taps1.push_back(b_.Einsum({xt, dy}, Shape({in_ch, out_ch})));
        TensorRef gx = b_.Einsum({dy, ft}, gx_shape);
        if (ns > 1) gx = tap(gx, 1, j1, false);
        gx0 = have_gx0 ? b_.Add(gx0, gx) : gx;
        have_gx0 = true;
      }
      if (ns > 1) {
        v1::Op stack = Typed("stack");
        (*stack.mutable_attrs())["new_dim"].set_s(f.shape.dim(1).name);
        df_rows.push_back(b_.Apply(stack, taps1));
      } else {
        df_rows.push_back(taps1[0]);
      }
      const TensorRef g = tap(gx0, 0, j0, false);
      dx = have_dx ? b_.Add(dx, g) : g;
      have_dx = true;
    }
    v1::Op stack = Typed("stack");
    (*stack.mutable_attrs())["new_dim"].set_s(f.shape.dim(0).name);
    AddGrad(op.inputs(1), SumTo(b_.Apply(stack, df_rows), f.shape));
    AddGrad(op.inputs(0), SumTo(dx, x.shape));
    return b_.status();
  }

  absl::StatusOr<std::vector<TensorRef>> Run(const TensorRef& loss,
                                             const std::vector<TensorRef>& xs) {
    // Ops on a path from some x to the loss.
    std::set<std::string> from_x;
    for (const TensorRef& x : xs) from_x.insert(x.name);
    for (int i : graph_.topological_order()) {
      const v1::Op& op = graph_.op(i);
      for (const std::string& in : op.inputs()) {
        if (from_x.count(in)) from_x.insert(op.name());
      }
    }
    std::set<std::string> to_loss = {loss.name};
    const std::vector<int>& order = graph_.topological_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const v1::Op& op = graph_.op(*it);
      if (!to_loss.count(op.name())) continue;
      for (const std::string& in : op.inputs()) to_loss.insert(in);
    }
    v1::Op ones = Typed("ones");
    *ones.mutable_shape() = loss.shape.ToProto();
    grads_[loss.name] = b_.Apply(ones, {});
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const v1::Op& op = graph_.op(*it);
      if (!from_x.count(op.name()) || !to_loss.count(op.name()) || op.inputs_size() == 0) continue;
      // Integer outputs and piecewise-constant ops pass back nothing.
      if (graph_.type(op.name()).dtype != DType::kFloat32 || ZeroGradient().count(op.type())) {
        continue;
      }
      auto g = grads_.find(op.name());
      if (g == grads_.end()) continue;
      RETURN_IF_ERROR(Backprop(op, g->second));
    }
    std::vector<TensorRef> out;
    for (const TensorRef& x : xs) {
      auto g = grads_.find(x.name);
      if (g != grads_.end()) {
        out.push_back(g->second);
      } else {
        out.push_back(Zeros(x.shape));
      }
    }
    RETURN_IF_ERROR(b_.status());
    return out;
  }

 private:
  GraphBuilder& b_;
  const Graph& graph_;
  std::map<std::string, TensorRef> grads_;
  std::set<std::string> used_dims_;
  int fresh_ = 0;
};

}  // namespace

bool HasGradient(const std::string& type) { return Rules().count(type) > 0; }

absl::StatusOr<std::vector<TensorRef>> Gradients(GraphBuilder& b, const TensorRef& loss,
                                                 const std::vector<TensorRef>& xs) {
  ASSIGN_OR_RETURN(Graph graph, b.Build());
  if (!graph.HasTensor(loss.name)) {
    return absl::InvalidArgumentError(absl::StrCat("loss '", loss.name, "' is not in the graph"));
  }
  for (const TensorRef& x : xs) {
    if (!graph.HasTensor(x.name)) {
      return absl::InvalidArgumentError(absl::StrCat("'", x.name, "' is not in the graph"));
    }
  }
  return Differentiator(b, graph).Run(loss, xs);
}

}  // namespace meshrt
