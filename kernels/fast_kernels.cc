#include "kernels/fast_kernels.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "kernels/einsum.h"
#include "kernels/elementwise.h"
#include "kernels/fused_kernels.h"
#include "kernels/norm_grad.h"
#include "kernels/reduce.h"
#include "util/logging.h"

namespace meshrt {
namespace {

using Result = std::optional<absl::Status>;
using Inputs = absl::Span<const Tensor* const>;

// ---- attributes (malformed ones go to the reference kernels, which report them) --------------

// attrs {scalar} as a float (f, or i), if present.
std::optional<float> Scalar(const v1::Op& op) {
  auto it = op.attrs().find("scalar");
  if (it == op.attrs().end()) return std::nullopt;
  if (it->second.value_case() == v1::AttrValue::kF) return it->second.f();
  if (it->second.value_case() == v1::AttrValue::kI) return static_cast<float>(it->second.i());
  return std::nullopt;
}

bool ScalarFirst(const v1::Op& op) {
  auto it = op.attrs().find("scalar_first");
  return it != op.attrs().end() && it->second.value_case() == v1::AttrValue::kB && it->second.b();
}

// attrs {epsilon} of the norms and their gradients (f, or i; 1e-6 when absent), or nullopt when
// it is of another kind.
std::optional<float> Epsilon(const v1::Op& op) {
  auto it = op.attrs().find("epsilon");
  if (it == op.attrs().end()) return 1e-6f;
  if (it->second.value_case() == v1::AttrValue::kF) return it->second.f();
  if (it->second.value_case() == v1::AttrValue::kI) return static_cast<float>(it->second.i());
  return std::nullopt;
}

std::vector<std::string> Dims(const v1::Op& op) { return {op.dims().begin(), op.dims().end()}; }

// ---- the kernels ----------------------------------------------------------------------------

Result Einsum(const v1::Op&, Inputs inputs, Tensor* out) {
  if (inputs.empty()) return std::nullopt;
  return kernels::Einsum(inputs, out);
}

// Binary ops and where: the inputs, or the inputs plus attrs.scalar as a 0-d tensor (see
// core/ops/ops_math.h).
Result BinaryOrWhere(const v1::Op& op, Inputs inputs, Tensor* out,
                     std::optional<kernels::BinaryOp> binary) {
  const size_t arity = binary ? 2 : 3;
  const std::optional<float> scalar = Scalar(op);
  const bool scalar_first = ScalarFirst(op);
  if (inputs.size() != (scalar ? arity - 1 : arity) || (scalar_first && (!scalar || !binary))) {
    return std::nullopt;
  }
  Tensor s;
  std::vector<const Tensor*> in(inputs.begin(), inputs.end());
  if (scalar) {
    s = Tensor::Float(Shape(), {*scalar});
    in.insert(scalar_first ? in.begin() : in.end(), &s);
  }
  if (binary) return kernels::Binary(*binary, *in[0], *in[1], out);
  return kernels::Where(*in[0], *in[1], *in[2], out);
}

template <kernels::BinaryOp kOp>
Result Binary(const v1::Op& op, Inputs inputs, Tensor* out) {
  return BinaryOrWhere(op, inputs, out, kOp);
}

Result Where(const v1::Op& op, Inputs inputs, Tensor* out) {
  return BinaryOrWhere(op, inputs, out, std::nullopt);
}

template <kernels::UnaryOp kOp>
Result Unary(const v1::Op&, Inputs inputs, Tensor* out) {
  if (inputs.size() != 1) return std::nullopt;
  return kernels::Unary(kOp, 0.0f, *inputs[0], out);
}

Result Scale(const v1::Op& op, Inputs inputs, Tensor* out) {
  const std::optional<float> scalar = Scalar(op);
  if (inputs.size() != 1 || !scalar) return std::nullopt;
  return kernels::Unary(kernels::UnaryOp::kScale, *scalar, *inputs[0], out);
}

// The tanh form unless attrs {approximate: false}.
Result Gelu(const v1::Op& op, Inputs inputs, Tensor* out) {
  if (inputs.size() != 1) return std::nullopt;
  auto a = op.attrs().find("approximate");
  const bool erf =
      a != op.attrs().end() && a->second.value_case() == v1::AttrValue::kB && !a->second.b();
  return kernels::Unary(erf ? kernels::UnaryOp::kGeluErf : kernels::UnaryOp::kGelu, 0.0f,
                        *inputs[0], out);
}

template <kernels::ReduceKind kKind>
Result Reduce(const v1::Op&, Inputs inputs, Tensor* out) {
  if (inputs.size() != 1) return std::nullopt;
  return kernels::Reduce(kKind, *inputs[0], out);
}

template <bool kLog>
Result Softmax(const v1::Op& op, Inputs inputs, Tensor* out) {
  if (inputs.size() != 1) return std::nullopt;
  return kernels::Softmax(*inputs[0], Dims(op), kLog, out);
}

// The executor's fused add + softmax (core/ir/step_fusion.h): softmax(inputs[0] + inputs[1]).
template <bool kLog>
Result AddSoftmax(const v1::Op& op, Inputs inputs, Tensor* out) {
  if (inputs.size() != 2) return std::nullopt;
  return kernels::AddSoftmax(*inputs[0], *inputs[1], Dims(op), kLog, out);
}

// layer_norm(x [, scale [, bias]]), rms_norm(x [, scale]).
template <bool kRms>
Result Normalize(const v1::Op& op, Inputs inputs, Tensor* out) {
  if (inputs.empty() || inputs.size() > (kRms ? 2 : 3)) return std::nullopt;
  const std::optional<float> epsilon = Epsilon(op);
  if (!epsilon) return std::nullopt;
  return kernels::Normalize(*inputs[0], inputs.size() > 1 ? inputs[1] : nullptr,
                            inputs.size() > 2 ? inputs[2] : nullptr, Dims(op), *epsilon, kRms, out);
}

// layer_norm_grad / rms_norm_grad (x [, scale], dy).
template <bool kRms>
Result NormGrad(const v1::Op& op, Inputs inputs, Tensor* out) {
  if (inputs.size() != 2 && inputs.size() != 3) return std::nullopt;
  const std::optional<float> epsilon = Epsilon(op);
  if (!epsilon) return std::nullopt;
  return kernels::NormGrad(*inputs[0], inputs.size() == 3 ? inputs[1] : nullptr, *inputs.back(),
                           Dims(op), *epsilon, kRms, out);
}

Result SoftmaxGrad(const v1::Op& op, Inputs inputs, Tensor* out) {
  if (inputs.size() != 2) return std::nullopt;
  return kernels::SoftmaxGrad(*inputs[0], *inputs[1], Dims(op), out);
}

Result SoftmaxCrossEntropy(const v1::Op&, Inputs inputs, Tensor* out) {
  if (inputs.size() != 2) return std::nullopt;
  return kernels::SoftmaxCrossEntropy(*inputs[0], *inputs[1], out);
}

// ---- the table ------------------------------------------------------------------------------

struct FastKernel {
  const char* type;
  FastKernelFn run;
};

const FastKernel kTable[] = {
    {"einsum", &Einsum},
    // elementwise
    {"add", &Binary<kernels::BinaryOp::kAdd>},
    {"sub", &Binary<kernels::BinaryOp::kSub>},
    {"mul", &Binary<kernels::BinaryOp::kMul>},
    {"div", &Binary<kernels::BinaryOp::kDiv>},
    {"minimum", &Binary<kernels::BinaryOp::kMinimum>},
    {"maximum", &Binary<kernels::BinaryOp::kMaximum>},
    {"pow", &Binary<kernels::BinaryOp::kPow>},
    {"equal", &Binary<kernels::BinaryOp::kEqual>},
    {"less", &Binary<kernels::BinaryOp::kLess>},
    {"greater", &Binary<kernels::BinaryOp::kGreater>},
    {"logical_and", &Binary<kernels::BinaryOp::kLogicalAnd>},
    {"logical_or", &Binary<kernels::BinaryOp::kLogicalOr>},
    {"where", &Where},
    {"relu", &Unary<kernels::UnaryOp::kRelu>},
    {"exp", &Unary<kernels::UnaryOp::kExp>},
    {"neg", &Unary<kernels::UnaryOp::kNeg>},
    {"scale", &Scale},
    {"log", &Unary<kernels::UnaryOp::kLog>},
    {"sqrt", &Unary<kernels::UnaryOp::kSqrt>},
    {"rsqrt", &Unary<kernels::UnaryOp::kRsqrt>},
    {"square", &Unary<kernels::UnaryOp::kSquare>},
    {"tanh", &Unary<kernels::UnaryOp::kTanh>},
    {"sigmoid", &Unary<kernels::UnaryOp::kSigmoid>},
    {"gelu", &Gelu},
    {"abs", &Unary<kernels::UnaryOp::kAbs>},
    {"sign", &Unary<kernels::UnaryOp::kSign>},
    {"reciprocal", &Unary<kernels::UnaryOp::kReciprocal>},
    // reductions and their composites
    {"reduce_sum", &Reduce<kernels::ReduceKind::kSum>},
    {"reduce_max", &Reduce<kernels::ReduceKind::kMax>},
    {"reduce_mean", &Reduce<kernels::ReduceKind::kMean>},
    {"reduce_min", &Reduce<kernels::ReduceKind::kMin>},
    {"reduce_any", &Reduce<kernels::ReduceKind::kAny>},
    {"reduce_all", &Reduce<kernels::ReduceKind::kAll>},
    {"reduce_logsumexp", &Reduce<kernels::ReduceKind::kLogSumExp>},
    {"softmax", &Softmax<false>},
    {"log_softmax", &Softmax<true>},
    {"_add_softmax", &AddSoftmax<false>},
    {"_add_log_softmax", &AddSoftmax<true>},
    {"_scaled_einsum_add", &kernels::ScaledEinsumAdd},
    {"_scaled_add", &kernels::ScaledAddOp},
    {"_masked_mul", &kernels::MaskedMul},
    {"layer_norm", &Normalize<false>},
    {"rms_norm", &Normalize<true>},
    {"layer_norm_grad", &NormGrad<false>},
    {"rms_norm_grad", &NormGrad<true>},
    {"softmax_grad", &SoftmaxGrad},
    {"softmax_cross_entropy", &SoftmaxCrossEntropy},
};

const absl::flat_hash_map<std::string, FastKernelFn>& Index() {
  static const auto* const index = [] {
    auto* m = new absl::flat_hash_map<std::string, FastKernelFn>();
    for (const FastKernel& k : kTable) {
      MESHRT_CHECK(m->emplace(k.type, k.run).second, "fast kernel listed twice: ", k.type);
    }
    return m;
  }();
  return *index;
}

bool AllFloat(Inputs inputs, const Tensor& out) {
  if (out.dtype() != DType::kFloat32) return false;
  for (const Tensor* t : inputs) {
    if (t == nullptr || t->dtype() != DType::kFloat32) return false;
  }
  return true;
}

}  // namespace

FastKernelFn FindFastKernel(absl::string_view type) {
  auto it = Index().find(type);
  if (it != Index().end()) return it->second;
  const OpInfo* info = FindOp(type);
  return info == nullptr ? nullptr : info->fast;
}

std::vector<std::string> FastKernelTypes() {
  std::vector<std::string> types;
  for (const FastKernel& k : kTable) types.push_back(k.type);
  for (const OpInfo& info : AllOps()) {
    if (info.fast != nullptr && !Index().contains(info.type)) types.push_back(info.type);
  }
  std::sort(types.begin(), types.end());
  return types;
}

std::optional<absl::Status> RunFastKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                          Tensor* output) {
  if (!AllFloat(inputs, *output)) return std::nullopt;
  const FastKernelFn run = FindFastKernel(op.type());
  if (run == nullptr) return std::nullopt;
  return run(op, inputs, output);
}

}  // namespace meshrt
