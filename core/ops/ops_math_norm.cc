// Softmax, log_softmax, layer_norm, rms_norm, softmax_cross_entropy and the fused gradients
// softmax_grad, layer_norm_grad, rms_norm_grad: shape inference, reference kernels, registration.
// Conventions are in core/ops/ops_math.h; lowerings in lower_math.cc.
//
// The reference kernels work row by row: a "row" is one index of the kept (not normalised) dims,
// and its elements are every index of the normalised dims. Sums are in double, two-pass where a
// one-pass form would lose precision (max before exp; mean before variance).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "core/ops/op_cost.h"
#include "core/ops/ops_math.h"
#include "core/ops/reference_kernels.h"
#include "util/status_macros.h"

namespace meshrt {
namespace math {
namespace {

absl::Status NeedFloat(const v1::Op& op, const std::vector<TensorType>& in) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].dtype != DType::kFloat32) {
      return OpError(op, absl::StrCat("input '", op.inputs(i), "' is ", DTypeName(in[i].dtype),
                                      "; ", op.type(), " needs float32 (cast it first)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEpsilon(const v1::Op& op) {
  auto it = op.attrs().find("epsilon");
  if (it == op.attrs().end()) return absl::OkStatus();
  if (it->second.value_case() != v1::AttrValue::kF &&
      it->second.value_case() != v1::AttrValue::kI) {
    return OpError(op, "attrs.epsilon must be a number");
  }
  if (FloatAttrOr(op, "epsilon", 0) < 0) return OpError(op, "attrs.epsilon must be >= 0");
  return absl::OkStatus();
}

float Epsilon(const v1::Op& op) { return FloatAttrOr(op, "epsilon", 1e-6f); }

absl::StatusOr<TensorType> InferSoftmax(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(NeedFloat(op, in));
  RETURN_IF_ERROR(ReducedDims(op, in[0].shape, /*need_one=*/true).status());
  return in[0];
}

// softmax_grad(y, dy): dy must have y's shape exactly (autodiff makes it so).
absl::StatusOr<TensorType> InferSoftmaxGrad(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(NeedFloat(op, in));
  RETURN_IF_ERROR(ReducedDims(op, in[0].shape, /*need_one=*/true).status());
  if (in[1].shape != in[0].shape) {
    return OpError(op, absl::StrCat("dy '", op.inputs(1), "' ", in[1].shape.ToString(),
                                    " must have the shape of y '", op.inputs(0), "' ",
                                    in[0].shape.ToString()));
  }
  return in[0];
}

absl::StatusOr<TensorType> InferNorm(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(NeedFloat(op, in));
  RETURN_IF_ERROR(ReducedDims(op, in[0].shape, /*need_one=*/true).status());
  RETURN_IF_ERROR(CheckEpsilon(op));
  for (size_t i = 1; i < in.size(); ++i) {
    for (const Dim& d : in[i].shape.dims()) {
      const int j = in[0].shape.IndexOf(d.name);
      if (j < 0 || in[0].shape.dim(j).size != d.size) {
        return OpError(
            op, absl::StrCat(i == 1 ? "scale '" : "bias '", op.inputs(i), "' has dim ", d.name, ":",
                             d.size, " which x ", in[0].shape.ToString(), " lacks"));
      }
    }
  }
  return in[0];
}

// layer_norm_grad / rms_norm_grad (x [, scale], dy): dy must have x's shape exactly (autodiff makes
// it so) and scale's dims must be normalised dims of x (the kernels read one scale vector per row).
absl::StatusOr<TensorType> InferNormGrad(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(NeedFloat(op, in));
  ASSIGN_OR_RETURN(const std::set<std::string> dims,
                   ReducedDims(op, in[0].shape, /*need_one=*/true));
  RETURN_IF_ERROR(CheckEpsilon(op));
  const Shape& x = in[0].shape;
  const Shape& dy = in.back().shape;
  if (dy != x) {
    return OpError(op, absl::StrCat("dy '", op.inputs(in.size() - 1), "' ", dy.ToString(),
                                    " must have the shape of x '", op.inputs(0), "' ", x.ToString(),
                                    " exactly (same dims in the same order)"));
  }
  if (in.size() == 3) {
    for (const Dim& d : in[1].shape.dims()) {
      const int j = x.IndexOf(d.name);
      if (j < 0 || x.dim(j).size != d.size || !dims.count(d.name)) {
        return OpError(op, absl::StrCat("scale '", op.inputs(1), "' has dim ", d.name, ":", d.size,
                                        " which is not a normalised dim of x ", x.ToString(),
                                        " (scale may span only the dims in `dims`)"));
      }
    }
  }
  return in[0];
}

absl::StatusOr<TensorType> InferCrossEntropy(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(NeedFloat(op, in));
  ASSIGN_OR_RETURN(std::set<std::string> dims, ReducedDims(op, in[0].shape, /*need_one=*/true));
  const Shape& l = in[0].shape;
  const Shape& t = in[1].shape;
  bool same = l.rank() == t.rank();
  for (const Dim& d : l.dims()) {
    const int j = t.IndexOf(d.name);
    same = same && j >= 0 && t.dim(j).size == d.size;
  }
  if (!same) {
    return OpError(op, absl::StrCat("targets '", op.inputs(1), "' ", t.ToString(),
                                    " must have the dims of logits '", op.inputs(0), "' ",
                                    l.ToString(), " (any order)"));
  }
  return TensorType{Without(l, dims), DType::kFloat32};
}

// Row geometry: offsets of each row's start and of each element within a row, for one tensor.
struct Rows {
  std::vector<int64_t> outer, inner;
  Rows(const Shape& t, const Shape& kept, const Shape& normalised)
      : outer(Offsets(t, kept)), inner(Offsets(t, normalised)) {}
};

// The kept and normalised dims of `x` for a kernel normalising over op.dims.
absl::Status NormalisedSplit(const v1::Op& op, const Shape& x, Shape* kept, Shape* normalised) {
  std::set<std::string> dims(op.dims().begin(), op.dims().end());
  if (dims.empty()) return absl::InvalidArgumentError("needs `dims` to normalise over");
  for (const std::string& d : dims) {
    if (!x.Contains(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("normalises dim '", d, "' but the input is ", x.ToString()));
    }
  }
  std::vector<Dim> n;
  for (const Dim& d : x.dims()) {
    if (dims.count(d.name)) n.push_back(d);
  }
  *kept = Without(x, dims);
  *normalised = Shape(std::move(n));
  return absl::OkStatus();
}

// Checks the output of an op whose output has exactly x's dims, and every input is float32.
absl::Status CheckSameDims(absl::Span<const Tensor* const> inputs, const Tensor& out) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    RETURN_IF_ERROR(CheckFloat(*inputs[i], absl::StrCat("input ", i)));
  }
  RETURN_IF_ERROR(CheckFloat(out, "the output"));
  RETURN_IF_ERROR(CheckDimsIn(inputs[0]->shape(), "the input", out.shape(), "the output"));
  return CheckDimsIn(out.shape(), "the output", inputs[0]->shape(), "the input");
}

absl::Status SoftmaxKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  RETURN_IF_ERROR(CheckInputs(inputs, 1, 1));
  RETURN_IF_ERROR(CheckSameDims(inputs, *out));
  const Tensor& x = *inputs[0];
  Shape kept, norm;
  RETURN_IF_ERROR(NormalisedSplit(op, x.shape(), &kept, &norm));
  const Rows xr(x.shape(), kept, norm), orows(out->shape(), kept, norm);
  const bool log = op.type() == "log_softmax";
  const float* p = x.f32();
  float* o = out->f32();
  for (size_t r = 0; r < xr.outer.size(); ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i : xr.inner) m = std::max(m, static_cast<double>(p[xr.outer[r] + i]));
    double s = 0;
    for (int64_t i : xr.inner) s += std::exp(p[xr.outer[r] + i] - m);
    for (size_t i = 0; i < xr.inner.size(); ++i) {
      const double z = p[xr.outer[r] + xr.inner[i]] - m;
      o[orows.outer[r] + orows.inner[i]] =
          static_cast<float>(log ? z - std::log(s) : std::exp(z) / s);
    }
  }
  return absl::OkStatus();
}

// y * (dy - sum over dims of dy * y), row by row (y and dy share one shape).
absl::Status SoftmaxGradKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                               Tensor* out) {
  RETURN_IF_ERROR(CheckInputs(inputs, 2, 2));
  RETURN_IF_ERROR(CheckSameDims(inputs, *out));
  const Tensor& y = *inputs[0];
  const Tensor& dy = *inputs[1];
  if (dy.shape() != y.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("dy ", dy.shape().ToString(),
                                                   " must have the shape of y ",
                                                   y.shape().ToString()));
  }
  Shape kept, norm;
  RETURN_IF_ERROR(NormalisedSplit(op, y.shape(), &kept, &norm));
  const Rows yr(y.shape(), kept, norm), orows(out->shape(), kept, norm);
  const float* py = y.f32();
  const float* pd = dy.f32();
  float* o = out->f32();
  for (size_t r = 0; r < yr.outer.size(); ++r) {
    double s = 0;
    for (int64_t i : yr.inner) s += static_cast<double>(py[yr.outer[r] + i]) * pd[yr.outer[r] + i];
    for (size_t i = 0; i < yr.inner.size(); ++i) {
      const int64_t at = yr.outer[r] + yr.inner[i];
      o[orows.outer[r] + orows.inner[i]] = static_cast<float>(py[at] * (pd[at] - s));
    }
  }
  return absl::OkStatus();
}

absl::Status NormKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  const bool rms = op.type() == "rms_norm";
  RETURN_IF_ERROR(CheckInputs(inputs, 1, rms ? 2 : 3));
  for (size_t i = 0; i < inputs.size(); ++i) {
    RETURN_IF_ERROR(CheckFloat(*inputs[i], absl::StrCat("input ", i)));
  }
  const Tensor& x = *inputs[0];
  RETURN_IF_ERROR(CheckSameDims({&x}, *out));
  for (size_t i = 1; i < inputs.size(); ++i) {
    RETURN_IF_ERROR(CheckDimsIn(inputs[i]->shape(), i == 1 ? "scale" : "bias", x.shape(), "x"));
  }
  Shape kept, norm;
  RETURN_IF_ERROR(NormalisedSplit(op, x.shape(), &kept, &norm));
  const Rows xr(x.shape(), kept, norm), orows(out->shape(), kept, norm);
  const Tensor* scale = inputs.size() > 1 ? inputs[1] : nullptr;
  const Tensor* bias = inputs.size() > 2 ? inputs[2] : nullptr;
  const Shape none;
  const Rows sr(scale ? scale->shape() : none, kept, norm);
  const Rows br(bias ? bias->shape() : none, kept, norm);
  const double eps = Epsilon(op);
  const double n = static_cast<double>(xr.inner.size());
  const float* p = x.f32();
  float* o = out->f32();
  for (size_t r = 0; r < xr.outer.size(); ++r) {
    double mean = 0;
    if (!rms) {
      for (int64_t i : xr.inner) mean += p[xr.outer[r] + i];
      mean /= n;
    }
    double var = 0;
    for (int64_t i : xr.inner) {
      const double c = p[xr.outer[r] + i] - mean;
      var += c * c;
    }
    const double inv = 1.0 / std::sqrt(var / n + eps);
    for (size_t i = 0; i < xr.inner.size(); ++i) {
      double y = (p[xr.outer[r] + xr.inner[i]] - mean) * inv;
      if (scale) y *= scale->f32()[sr.outer[r] + sr.inner[i]];
      if (bias) y += bias->f32()[br.outer[r] + br.inner[i]];
      o[orows.outer[r] + orows.inner[i]] = static_cast<float>(y);
    }
  }
  return absl::OkStatus();
}

// dx of layer_norm / rms_norm, row by row: with g = dy * scale (or dy), xhat = (x - mean) r (or
// x r), r = 1 / sqrt(mean(xc^2) + eps): dx = r (g - mean(g) - xhat mean(g xhat)); rms_norm drops
// mean(g). Inputs x [, scale], dy; x, dy and the output have the same dims (any order each).
absl::Status NormGradKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  RETURN_IF_ERROR(CheckInputs(inputs, 2, 3));
  const Tensor& x = *inputs[0];
  const Tensor& dy = *inputs.back();
  const Tensor* scale = inputs.size() == 3 ? inputs[1] : nullptr;
  RETURN_IF_ERROR(CheckSameDims({&x, &dy}, *out));
  RETURN_IF_ERROR(CheckDimsIn(dy.shape(), "dy", x.shape(), "x"));
  RETURN_IF_ERROR(CheckDimsIn(x.shape(), "x", dy.shape(), "dy"));
  if (scale != nullptr) {
    RETURN_IF_ERROR(CheckFloat(*scale, "scale"));
    RETURN_IF_ERROR(CheckDimsIn(scale->shape(), "scale", x.shape(), "x"));
  }
  Shape kept, norm;
  RETURN_IF_ERROR(NormalisedSplit(op, x.shape(), &kept, &norm));
  const Rows xr(x.shape(), kept, norm), dr(dy.shape(), kept, norm);
  const Rows orows(out->shape(), kept, norm);
  const Shape none;
  const Rows sr(scale ? scale->shape() : none, kept, norm);
  const bool layer = op.type() == "layer_norm_grad";
  const double eps = Epsilon(op);
  const double n = static_cast<double>(xr.inner.size());
  const float* px = x.f32();
  const float* pd = dy.f32();
  std::vector<double> g(xr.inner.size()), xhat(xr.inner.size());
  for (size_t r = 0; r < xr.outer.size(); ++r) {
    double mean = 0;
    if (layer) {
      for (int64_t i : xr.inner) mean += px[xr.outer[r] + i];
      mean /= n;
    }
    double var = 0;
    for (int64_t i : xr.inner) {
      const double c = px[xr.outer[r] + i] - mean;
      var += c * c;
    }
    const double inv = 1.0 / std::sqrt(var / n + eps);
    double sum_g = 0, sum_gx = 0;
    for (size_t i = 0; i < xr.inner.size(); ++i) {
      xhat[i] = (px[xr.outer[r] + xr.inner[i]] - mean) * inv;
      g[i] = pd[dr.outer[r] + dr.inner[i]];
      if (scale) g[i] *= scale->f32()[sr.outer[r] + sr.inner[i]];
      sum_g += g[i];
      sum_gx += g[i] * xhat[i];
    }
    const double mean_g = layer ? sum_g / n : 0.0;
    const double mean_gx = sum_gx / n;
    for (size_t i = 0; i < xr.inner.size(); ++i) {
      out->f32()[orows.outer[r] + orows.inner[i]] =
          static_cast<float>(inv * (g[i] - mean_g - xhat[i] * mean_gx));
    }
  }
  return absl::OkStatus();
}

absl::Status CrossEntropyKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                Tensor* out) {
  RETURN_IF_ERROR(CheckInputs(inputs, 2, 2));
  const Tensor& l = *inputs[0];
  const Tensor& t = *inputs[1];
  RETURN_IF_ERROR(CheckFloat(l, "the logits"));
  RETURN_IF_ERROR(CheckFloat(t, "the targets"));
  RETURN_IF_ERROR(CheckFloat(*out, "the output"));
  RETURN_IF_ERROR(CheckDimsIn(l.shape(), "the logits", t.shape(), "the targets"));
  RETURN_IF_ERROR(CheckDimsIn(t.shape(), "the targets", l.shape(), "the logits"));
  Shape kept, norm;
  RETURN_IF_ERROR(SplitReduce(l.shape(), out->shape(), &kept, &norm));
  const Rows lr(l.shape(), kept, norm), tr(t.shape(), kept, norm);
  for (size_t r = 0; r < lr.outer.size(); ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i : lr.inner) m = std::max(m, static_cast<double>(l.f32()[lr.outer[r] + i]));
    double s = 0;
    for (int64_t i : lr.inner) s += std::exp(l.f32()[lr.outer[r] + i] - m);
    const double lse = m + std::log(s);
    double loss = 0;
    for (size_t i = 0; i < lr.inner.size(); ++i) {
      loss -= t.f32()[tr.outer[r] + tr.inner[i]] * (l.f32()[lr.outer[r] + lr.inner[i]] - lse);
    }
    out->f32()[r] = static_cast<float>(loss);
  }
  return absl::OkStatus();
}

OpInfo Norm(const char* type, int min_inputs, int max_inputs, const char* summary,
            const char* collectives, InferFn infer, KernelFn reference, LowerFn lower) {
  OpInfo info{type,
              OpFamily::kReduce,
              min_inputs,
              max_inputs,
              true,
              summary,
              absl::StrCat(collectives, " over the mesh dims of split normalised dims")};
  info.infer = infer;
  info.reference = reference;
  info.lower = lower;
  return info;
}

// The gradient of softmax, one op (autodiff emits it): fused, it reads y and dy once per row
// instead of four passes over the whole tensor.
OpInfo SoftmaxGrad() {
  OpInfo info = Norm("softmax_grad", 2, 2,
                     "y * (dy - sum over `dims` of dy * y): softmax's gradient for y = softmax(x) "
                     "and upstream dy (emitted by autodiff); inputs y, dy (same shape)",
                     "allreduce(sum)", InferSoftmaxGrad, SoftmaxGradKernel, LowerSoftmaxGrad);
  info.differentiable = false;  // a gradient op; second derivatives are not supported
  return info;
}

// The gradient w.r.t. x of layer_norm / rms_norm, one op (autodiff emits it): fused, it reads x and
// dy once per row instead of ~15 passes of primitive ops over the whole tensor.
OpInfo NormGrad(const char* type, const char* summary, const char* collectives) {
  OpInfo info =
      Norm(type, 2, 3, summary, collectives, InferNormGrad, NormGradKernel, LowerNormGrad);
  info.differentiable = false;  // a gradient op; second derivatives are not supported
  return info;
}

// Costs (core/ops/op_cost.h): a small constant per element of x, by what the fused kernel does per
// element, instead of the reduce family's one FLOP.
std::vector<OpInfo> WithCosts(std::vector<OpInfo> ops) {
  for (OpInfo& op : ops) {
    if (op.type == "softmax" || op.type == "log_softmax" || op.type == "softmax_cross_entropy") {
      op.cost = &PerInputElementCost<kSoftmaxFlops>;
    } else if (op.type == "layer_norm" || op.type == "rms_norm") {
      op.cost = &PerInputElementCost<kNormFlops>;
    } else if (op.type == "softmax_grad") {
      op.cost = &PerInputElementCost<4>;
    } else {
      op.cost = &PerInputElementCost<kNormGradFlops>;
    }
  }
  return ops;
}

const bool kRegistered = RegisterOps(WithCosts({
    SoftmaxGrad(),
    NormGrad("layer_norm_grad",
             "dx of layer_norm over `dims`: r (g - mean(g) - xhat mean(g xhat)) with g = dy * "
             "scale, xhat = (x - mean) r, r = rsqrt(var + attrs.epsilon) (emitted by autodiff); "
             "inputs x [scale] dy (dy of x's shape; scale over normalised dims)",
             "allreduce(sum) four times (mean, variance, mean(g), mean(g xhat))"),
    NormGrad("rms_norm_grad",
             "dx of rms_norm over `dims`: r (g - xhat mean(g xhat)) with g = dy * scale, xhat = x "
             "r, r = rsqrt(mean(x^2) + attrs.epsilon) (emitted by autodiff); inputs x [scale] dy",
             "allreduce(sum) twice (mean(x^2), mean(g xhat))"),
    Norm("softmax", 1, 1, "exp(x) / sum of exp(x) over `dims`",
         "allreduce(max) then allreduce(sum)", InferSoftmax, SoftmaxKernel, LowerSoftmax),
    Norm("log_softmax", 1, 1, "x - logsumexp(x) over `dims`", "allreduce(max) then allreduce(sum)",
         InferSoftmax, SoftmaxKernel, LowerSoftmax),
    Norm("layer_norm", 1, 3,
         "(x - mean) / sqrt(var + attrs.epsilon) * scale + bias over `dims`; inputs x [scale "
         "[bias]]",
         "allreduce(sum) twice (mean, variance)", InferNorm, NormKernel, LowerNorm),
    Norm("rms_norm", 1, 2,
         "x / sqrt(mean(x^2) + attrs.epsilon) * scale over `dims`; inputs x [scale]",
         "allreduce(sum)", InferNorm, NormKernel, LowerNorm),
    Norm("softmax_cross_entropy", 2, 2,
         "-sum over `dims` of targets * log_softmax(logits); inputs logits, targets (soft, same "
         "dims); output = logits' dims minus `dims`",
         "allreduce(max), allreduce(sum), allreduce(sum)", InferCrossEntropy, CrossEntropyKernel,
         LowerCrossEntropy),
}));

}  // namespace
}  // namespace math
}  // namespace meshrt
