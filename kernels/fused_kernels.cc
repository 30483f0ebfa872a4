#include "kernels/fused_kernels.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/einsum.h"
#include "kernels/scaled_add.h"

namespace meshrt {
namespace kernels {
namespace {

absl::Status Refused(const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("the fused op does not take this: ", why));
}

// attrs {name} as a float, if it is one.
std::optional<float> FloatAttr(const v1::Op& op, const char* name) {
  auto it = op.attrs().find(name);
  if (it == op.attrs().end() || it->second.value_case() != v1::AttrValue::kF) return std::nullopt;
  return it->second.f();
}

}  // namespace

std::optional<absl::Status> ScaledEinsumAdd(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                            Tensor* out) {
  const std::optional<float> sign = FloatAttr(op, "sign");
  if (!sign || inputs.size() < 3) return Refused("attr sign and inputs (x, s, einsum inputs...)");
  const Tensor& x = *inputs[0];
  const Tensor& s = *inputs[1];
  if (s.shape().rank() != 0 || x.shape() != out->shape()) {
    return Refused(absl::StrCat("x ", x.shape().ToString(), " and s ", s.shape().ToString(),
                                " for an output ", out->shape().ToString()));
  }
  std::memcpy(out->f32(), x.f32(), sizeof(float) * x.num_elements());
  return EinsumAccumulate(inputs.subspan(2), *sign * s.f32()[0], out);
}

std::optional<absl::Status> ScaledAddOp(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                        Tensor* out) {
  const std::optional<float> sign = FloatAttr(op, "sign");
  if (!sign || inputs.size() != 3) return Refused("attr sign and inputs (x, m0, m1)");
  const Tensor& x = *inputs[0];
  const Tensor* scalar = inputs[2]->shape().rank() == 0 ? inputs[2] : inputs[1];
  const Tensor* y = scalar == inputs[2] ? inputs[1] : inputs[2];
  if (scalar->shape().rank() != 0 || x.shape() != out->shape() || y->shape() != out->shape()) {
    return Refused(absl::StrCat("x ", x.shape().ToString(), ", m0 ", inputs[1]->shape().ToString(),
                                " and m1 ", inputs[2]->shape().ToString(), " for an output ",
                                out->shape().ToString()));
  }
  ScaledAdd(x.f32(), y->f32(), *sign * scalar->f32()[0], out->f32(), out->num_elements());
  return absl::OkStatus();
}

std::optional<absl::Status> MaskedMul(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                      Tensor* out) {
  const std::optional<float> scalar = FloatAttr(op, "scalar");
  if (!scalar || inputs.size() != 2) return Refused("attr scalar and inputs (dy, x)");
  const Tensor& dy = *inputs[0];
  const Tensor& x = *inputs[1];
  if (dy.shape() != out->shape() || x.shape() != out->shape()) {
    return Refused(absl::StrCat("dy ", dy.shape().ToString(), " and x ", x.shape().ToString(),
                                " for an output ", out->shape().ToString()));
  }
  const float s = *scalar;
  const float* xp = x.f32();
  const float* dp = dy.f32();
  float* op_out = out->f32();
  const int64_t n = out->num_elements();
  // The mask's 1 or 0 times dy, as the two ops compute it (0 * dy keeps dy's sign, NaN stays; the
  // product is commutative, so the mask's side does not matter).
  for (int64_t i = 0; i < n; ++i) op_out[i] = dp[i] * (xp[i] > s ? 1.0f : 0.0f);
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace meshrt
