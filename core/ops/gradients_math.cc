// Gradient rules of einsum and the math family (elementwise ops, reductions, softmax, norms,
// cross-entropy), attached to their ops' records (core/ops/gradient.h). Each rule is written with
// existing ops, so gradients lower like any op. Comparisons, sign and reduce_any/all are piecewise
// constant: zero gradient.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/ops/gradient.h"
#include "core/ops/ops.h"

namespace meshrt {
namespace {

using gradient::HasScalar;
using gradient::OnlyDimsOf;
using gradient::Scalar;
using gradient::ScalarFirst;
using gradient::Typed;
using gradient::WithDims;
using gradient::WithScalar;

// ---- einsum -----------------------------------------------------------------------------------

// d input i = einsum(dy, every other input) to input i's shape.
absl::Status EinsumGradient(Backward& g) {
  for (size_t i = 0; i < g.in.size(); ++i) {
    if (g.in[i].dtype != DType::kFloat32) continue;
    std::vector<TensorRef> factors = {g.dy};
    for (size_t j = 0; j < g.in.size(); ++j) {
      if (j != i) factors.push_back(g.in[j]);
    }
    g.GradOfShape(i, g.b.Einsum(factors, g.in[i].shape));
  }
  return g.b.status();
}

// ---- binary ops: x op s (s op x with scalar_first), or x op y broadcast by name ---------------

absl::Status AddGradient(Backward& g) {
  g.Grad(0, g.dy);
  if (!HasScalar(g.op)) g.Grad(1, g.dy);
  return g.b.status();
}

absl::Status SubGradient(Backward& g) {
  if (HasScalar(g.op)) {
    g.Grad(0, ScalarFirst(g.op) ? g.b.Neg(g.dy) : g.dy);
  } else {
    g.Grad(0, g.dy);
    g.Grad(1, g.b.Neg(g.dy));
  }
  return g.b.status();
}

absl::Status MulGradient(Backward& g) {
  if (HasScalar(g.op)) {
    g.Grad(0, g.b.Scale(g.dy, Scalar(g.op)));
    return g.b.status();
  }
  if (g.in[0].dtype != DType::kFloat32) return g.b.status();
  for (int i = 0; i < 2; ++i) {
    // An input with every dim of the output takes dy * other elementwise; a broadcast one sums
    // that product over the dims it lacks, which is an einsum.
    if (g.in[i].shape.rank() == g.dy.shape.rank()) {
      g.Grad(i, g.b.Mul(g.dy, g.in[1 - i]));
    } else {
      g.GradOfShape(i, g.b.Einsum({g.dy, g.in[1 - i]}, g.in[i].shape));
    }
  }
  return g.b.status();
}

// d/dx = 1/y, d/dy = -x/y^2 = -out/y; x / s: dy / s; s / x: -dy out / x.
absl::Status DivGradient(Backward& g) {
  if (HasScalar(g.op)) {
    g.Grad(0, ScalarFirst(g.op) ? g.b.Neg(g.b.Mul(g.dy, g.b.Div(g.y, g.in[0])))
                                : g.b.Scale(g.dy, 1.0f / Scalar(g.op)));
  } else {
    g.Grad(0, g.b.Div(g.dy, g.in[1]));
    g.Grad(1, g.b.Neg(g.b.Mul(g.dy, g.b.Div(g.y, g.in[1]))));
  }
  return g.b.status();
}

// d/dx = y x^(y-1); d/dy = out ln(x) (0 where x <= 0). x^s: dy s x^(s-1); s^x: dy out ln(s).
absl::Status PowGradient(Backward& g) {
  if (HasScalar(g.op)) {
    const float s = Scalar(g.op);
    g.Grad(0, ScalarFirst(g.op) ? g.b.Scale(g.b.Mul(g.dy, g.y), std::log(s))
                                : g.b.Mul(g.dy, g.b.Scale(g.WithS("pow", g.in[0], s - 1.0f), s)));
    return g.b.status();
  }
  if (g.in[0].dtype != DType::kFloat32) return g.b.status();
  g.Grad(0,
         g.b.Mul(g.dy, g.b.Mul(g.in[1], g.Binary("pow", g.in[0], g.WithS("sub", g.in[1], 1.0f)))));
  TensorRef ln = g.b.Apply(WithScalar("where", 0.0f),
                           {g.WithS("greater", g.in[0], 0.0f), g.b.Apply(Typed("log"), {g.in[0]})});
  g.Grad(1, g.b.Mul(g.dy, g.b.Mul(g.y, ln)));
  return g.b.status();
}

// maximum, minimum: y takes dy where it wins strictly, x elsewhere (ties go to x): a subgradient.
// With a scalar: dy where x >= s (maximum; ties: x).
absl::Status MinMaxGradient(Backward& g) {
  const std::string less_or_greater = g.op.type() == "maximum" ? "less" : "greater";
  if (HasScalar(g.op)) {
    const TensorRef other = g.WithS(less_or_greater, g.in[0], Scalar(g.op));
    g.Grad(0, g.b.Sub(g.dy, g.b.Mul(g.dy, other)));
    return g.b.status();
  }
  const TensorRef y_wins = g.Binary(less_or_greater, g.in[0], g.in[1]);
  const TensorRef to_y = g.b.Mul(g.dy, y_wins);
  g.Grad(0, g.b.Sub(g.dy, to_y));
  g.Grad(1, to_y);
  return g.b.status();
}

// where(c, x, y): x gets dy where c, y elsewhere; c (a condition) gets none.
absl::Status WhereGradient(Backward& g) {
  const TensorRef to_x = g.b.Apply(WithScalar("where", 0.0f), {g.in[0], g.dy});
  g.Grad(1, to_x);
  if (!HasScalar(g.op)) g.Grad(2, g.b.Apply(Typed("where"), {g.in[0], g.Zeros(g.dy.shape), g.dy}));
  return g.b.status();
}

// ---- unary ops ----------------------------------------------------------------------------------

absl::Status ScaleGradient(Backward& g) {
  g.Grad(0, g.b.Scale(g.dy, Scalar(g.op)));
  return g.b.status();
}

absl::Status NegGradient(Backward& g) {
  g.Grad(0, g.b.Neg(g.dy));
  return g.b.status();
}

absl::Status ReluGradient(Backward& g) {
  g.Grad(0, g.b.Mul(g.dy, g.WithS("greater", g.in[0], 0.0f)));
  return g.b.status();
}

absl::Status AbsGradient(Backward& g) {
  g.Grad(0, g.b.Mul(g.dy, g.Unary("sign", g.in[0])));
  return g.b.status();
}

absl::Status ExpGradient(Backward& g) {
  g.Grad(0, g.b.Mul(g.dy, g.y));
  return g.b.status();
}

absl::Status LogGradient(Backward& g) {
  g.Grad(0, g.b.Div(g.dy, g.in[0]));
  return g.b.status();
}

absl::Status SqrtGradient(Backward& g) {
  g.Grad(0, g.b.Div(g.dy, g.b.Scale(g.y, 2.0f)));
  return g.b.status();
}

// -1/2 x^(-3/2) = -y^3 / 2
absl::Status RsqrtGradient(Backward& g) {
  g.Grad(0, g.b.Scale(g.b.Mul(g.dy, g.b.Mul(g.y, g.Unary("square", g.y))), -0.5f));
  return g.b.status();
}

// -1/x^2 = -y^2
absl::Status ReciprocalGradient(Backward& g) {
  g.Grad(0, g.b.Neg(g.b.Mul(g.dy, g.Unary("square", g.y))));
  return g.b.status();
}

absl::Status SquareGradient(Backward& g) {
  g.Grad(0, g.b.Mul(g.dy, g.b.Scale(g.in[0], 2.0f)));
  return g.b.status();
}

// 1 - y^2
absl::Status TanhGradient(Backward& g) {
  g.Grad(0, g.b.Mul(g.dy, g.WithS("sub", g.Unary("square", g.y), 1.0f, true)));
  return g.b.status();
}

// y (1 - y)
absl::Status SigmoidGradient(Backward& g) {
  g.Grad(0, g.b.Mul(g.dy, g.b.Mul(g.y, g.WithS("sub", g.y, 1.0f, true))));
  return g.b.status();
}

absl::Status GeluGradient(Backward& g) {
  GraphBuilder& b = g.b;
  const TensorRef& x = g.in[0];
  TensorRef d;
  if (BoolAttrOr(g.op, "approximate", true)) {
    // 0.5 x (1 + tanh(u)), u = c (x + a x^3): 0.5 (1 + th) + 0.5 x (1 - th^2) c (1 + 3a x^2)
    const float c = 0.7978845608028654f, a = 0.044715f;
    const TensorRef x2 = g.Unary("square", x);
    const TensorRef u = b.Scale(b.Add(x, b.Mul(x, b.Scale(x2, a))), c);
    const TensorRef th = g.Unary("tanh", u);
    const TensorRef du = g.WithS("add", b.Scale(x2, 3.0f * a * c), c);
    const TensorRef sech2 = g.WithS("sub", g.Unary("square", th), 1.0f, true);
    d = b.Add(b.Scale(g.WithS("add", th, 1.0f), 0.5f), b.Mul(b.Scale(x, 0.5f), b.Mul(sech2, du)));
  } else {
    // x Phi(x): Phi(x) + x phi(x). Phi = gelu(x) / x away from 0 (exact to float rounding),
    // 1/2 + x phi(0) near it (error below x^3 / 15).
    const TensorRef far = g.WithS("greater", g.Unary("abs", x), 1e-3f);
    const TensorRef near = g.WithS("add", b.Scale(x, 0.3989422804014327f), 0.5f);
    const TensorRef cdf = b.Apply(Typed("where"), {far, b.Div(g.y, x), near});
    const TensorRef pdf = b.Scale(b.Exp(b.Scale(g.Unary("square", x), -0.5f)), 0.3989422804014327f);
    d = b.Add(cdf, b.Mul(x, pdf));
  }
  g.Grad(0, b.Mul(g.dy, d));
  return b.status();
}

// float -> float: the identity (int in or out: no gradient).
absl::Status CastGradient(Backward& g) {
  g.Grad(0, g.dy);
  return g.b.status();
}

// The same mask: a dropout of dy keyed on this op's stream (its name unless set).
absl::Status DropoutGradient(Backward& g) {
  v1::Op mask = gradient::Copy(g.op);
  (*mask.mutable_attrs())["stream"].set_s(StringAttrOr(g.op, "stream", g.op.name()));
  g.Grad(0, g.b.Apply(mask, {g.dy}));
  return g.b.status();
}

// ---- reductions -------------------------------------------------------------------------------

absl::Status ReduceSumGradient(Backward& g) {
  g.Grad(0, g.b.Einsum({g.dy}, g.in[0].shape));
  return g.b.status();
}

absl::Status ReduceMeanGradient(Backward& g) {
  const double count = static_cast<double>(g.in[0].shape.num_elements()) /
                       std::max<int64_t>(1, g.y.shape.num_elements());
  g.Grad(0, g.b.Scale(g.b.Einsum({g.dy}, g.in[0].shape), static_cast<float>(1.0 / count)));
  return g.b.status();
}

// reduce_max, reduce_min: dy shared equally by the elements equal to the extreme (one, away from
// ties).
absl::Status ReduceExtremeGradient(Backward& g) {
  const TensorRef mask = g.Binary("equal", g.in[0], g.y);
  const TensorRef count = g.OnDims("reduce_sum", mask);
  g.Grad(0, g.b.Mul(mask, g.b.Div(g.dy, count)));
  return g.b.status();
}

// dy softmax(x) = dy exp(x - y)
absl::Status ReduceLogSumExpGradient(Backward& g) {
  g.Grad(0, g.b.Mul(g.b.Exp(g.b.Sub(g.in[0], g.y)), g.dy));
  return g.b.status();
}

// y (dy - sum_D(dy y)); one fused op (softmax_grad) when dy has y's shape.
absl::Status SoftmaxGradient(Backward& g) {
  if (g.dy.shape == g.y.shape) {
    g.Grad(0, g.b.Apply(WithDims("softmax_grad", g.op), {g.y, g.dy}));
  } else {
    TensorRef s = g.OnDims("reduce_sum", g.b.Mul(g.dy, g.y));
    g.Grad(0, g.b.Mul(g.y, g.b.Sub(g.dy, s)));
  }
  return g.b.status();
}

// dy - exp(y) sum_D(dy)
absl::Status LogSoftmaxGradient(Backward& g) {
  TensorRef s = g.OnDims("reduce_sum", g.dy);
  g.Grad(0, g.b.Sub(g.dy, g.b.Mul(g.b.Exp(g.y), s)));
  return g.b.status();
}

// loss = -sum_D t log_softmax(l): dl = dy (softmax(l) sum_D(t) - t), dt = -dy log_softmax(l)
absl::Status SoftmaxCrossEntropyGradient(Backward& g) {
  TensorRef p = g.OnDims("softmax", g.in[0]);
  TensorRef mass = g.OnDims("reduce_sum", g.in[1]);
  g.Grad(0, g.b.Mul(g.dy, g.b.Sub(g.b.Mul(p, mass), g.in[1])));
  g.Grad(1, g.b.Neg(g.b.Mul(g.dy, g.OnDims("log_softmax", g.in[0]))));
  return g.b.status();
}

// layer_norm, rms_norm: xhat = (x - mean) r (layer_norm) or x r (rms_norm),
// r = rsqrt(mean_D(xc^2) + eps), y = xhat scale + bias. With g = dy scale:
//   layer_norm dx = r (g - mean_D(g) - xhat mean_D(g xhat)); rms_norm drops mean_D(g).
absl::Status NormGradient(Backward& g) {
  GraphBuilder& b = g.b;
  const v1::Op& op = g.op;
  const std::vector<TensorRef>& in = g.in;
  const TensorRef& dy = g.dy;
  const std::string& t = op.type();
  const bool layer = t == "layer_norm";
  const float eps = FloatAttrOr(op, "epsilon", 1e-6f);
  if (dy.shape == in[0].shape && (in.size() < 2 || OnlyDimsOf(in[1].shape, op))) {
    // Fused: dx is one op (layer_norm_grad / rms_norm_grad) and xhat, for dscale, is the forward
    // op without scale and bias. The grad op reads one scale vector per row, so it takes a scale
    // over normalised dims only (any other scale: the primitive chain below).
    v1::Op dx = WithDims(t + "_grad", op);
    (*dx.mutable_attrs())["epsilon"].set_f(eps);
    if (in.size() > 1) {
      v1::Op normalise = WithDims(t, op);
      (*normalise.mutable_attrs())["epsilon"].set_f(eps);
      g.Grad(1, b.Mul(dy, b.Apply(normalise, {in[0]})));
    }
    if (in.size() > 2) g.Grad(2, dy);
    std::vector<TensorRef> dx_in = {in[0], dy};
    if (in.size() > 1) dx_in.insert(dx_in.begin() + 1, in[1]);
    g.Grad(0, b.Apply(dx, dx_in));
    return b.status();
  }
  const TensorRef xc = layer ? b.Sub(in[0], g.OnDims("reduce_mean", in[0])) : in[0];
  const TensorRef r =
      g.Unary("rsqrt", g.WithS("add", g.OnDims("reduce_mean", g.Unary("square", xc)), eps));
  const TensorRef xhat = b.Mul(xc, r);
  TensorRef gs = dy;
  if (in.size() > 1) {
    g.Grad(1, b.Mul(dy, xhat));
    gs = b.Mul(dy, in[1]);
  }
  if (in.size() > 2) g.Grad(2, dy);
  TensorRef c = b.Mul(xhat, g.OnDims("reduce_mean", b.Mul(gs, xhat)));
  if (layer) c = b.Add(c, g.OnDims("reduce_mean", gs));
  g.Grad(0, b.Mul(b.Sub(gs, c), r));
  return b.status();
}

const bool kRegistered = RegisterGradients({
                             {"einsum", &EinsumGradient},
                             {"add", &AddGradient},
                             {"sub", &SubGradient},
                             {"mul", &MulGradient},
                             {"div", &DivGradient},
                             {"pow", &PowGradient},
                             {"maximum", &MinMaxGradient},
                             {"minimum", &MinMaxGradient},
                             {"where", &WhereGradient},
                             {"scale", &ScaleGradient},
                             {"neg", &NegGradient},
                             {"relu", &ReluGradient},
                             {"abs", &AbsGradient},
                             {"exp", &ExpGradient},
                             {"log", &LogGradient},
                             {"sqrt", &SqrtGradient},
                             {"rsqrt", &RsqrtGradient},
                             {"reciprocal", &ReciprocalGradient},
                             {"square", &SquareGradient},
                             {"tanh", &TanhGradient},
                             {"sigmoid", &SigmoidGradient},
                             {"gelu", &GeluGradient},
                             {"cast", &CastGradient},
                             {"dropout", &DropoutGradient},
                             {"reduce_sum", &ReduceSumGradient},
                             {"reduce_mean", &ReduceMeanGradient},
                             {"reduce_max", &ReduceExtremeGradient},
                             {"reduce_min", &ReduceExtremeGradient},
                             {"reduce_logsumexp", &ReduceLogSumExpGradient},
                             {"softmax", &SoftmaxGradient},
                             {"log_softmax", &LogSoftmaxGradient},
                             {"softmax_cross_entropy", &SoftmaxCrossEntropyGradient},
                             {"layer_norm", &NormGradient},
                             {"rms_norm", &NormGradient},
                         }) &&
                         RegisterZeroGradients({"equal", "less", "greater", "logical_and",
                                                "logical_or", "sign", "reduce_any", "reduce_all"});

}  // namespace
}  // namespace meshrt
