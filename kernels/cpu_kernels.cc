#include "kernels/cpu_kernels.h"

#include <algorithm>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/einsum.h"
#include "kernels/elementwise.h"
#include "kernels/norm_grad.h"
#include "kernels/reduce.h"

namespace meshrt {
namespace {

std::optional<kernels::BinaryOp> BinaryOpOf(const std::string& type) {
  using kernels::BinaryOp;
  static const auto* const kOps = new std::map<std::string, BinaryOp>{
      {"add", BinaryOp::kAdd},
      {"sub", BinaryOp::kSub},
      {"mul", BinaryOp::kMul},
      {"div", BinaryOp::kDiv},
      {"minimum", BinaryOp::kMinimum},
      {"maximum", BinaryOp::kMaximum},
      {"pow", BinaryOp::kPow},
      {"equal", BinaryOp::kEqual},
      {"less", BinaryOp::kLess},
      {"greater", BinaryOp::kGreater},
      {"logical_and", BinaryOp::kLogicalAnd},
      {"logical_or", BinaryOp::kLogicalOr},
  };
  auto it = kOps->find(type);
  if (it == kOps->end()) return std::nullopt;
  return it->second;
}

std::optional<kernels::UnaryOp> UnaryOpOf(const v1::Op& op) {
  using kernels::UnaryOp;
  static const auto* const kOps = new std::map<std::string, UnaryOp>{
      {"relu", UnaryOp::kRelu},   {"exp", UnaryOp::kExp},
      {"neg", UnaryOp::kNeg},     {"scale", UnaryOp::kScale},
      {"log", UnaryOp::kLog},     {"sqrt", UnaryOp::kSqrt},
      {"rsqrt", UnaryOp::kRsqrt}, {"square", UnaryOp::kSquare},
      {"tanh", UnaryOp::kTanh},   {"sigmoid", UnaryOp::kSigmoid},
      {"gelu", UnaryOp::kGelu},   {"abs", UnaryOp::kAbs},
      {"sign", UnaryOp::kSign},   {"reciprocal", UnaryOp::kReciprocal},
  };
  auto it = kOps->find(op.type());
  if (it == kOps->end()) return std::nullopt;
  if (it->second == UnaryOp::kGelu) {
    auto a = op.attrs().find("approximate");
    if (a != op.attrs().end() && a->second.value_case() == v1::AttrValue::kB && !a->second.b()) {
      return UnaryOp::kGeluErf;
    }
  }
  return it->second;
}

std::optional<kernels::ReduceKind> ReduceKindOf(const std::string& type) {
  using kernels::ReduceKind;
  if (type == "reduce_sum") return ReduceKind::kSum;
  if (type == "reduce_max") return ReduceKind::kMax;
  if (type == "reduce_mean") return ReduceKind::kMean;
  if (type == "reduce_min") return ReduceKind::kMin;
  if (type == "reduce_any") return ReduceKind::kAny;
  if (type == "reduce_all") return ReduceKind::kAll;
  if (type == "reduce_logsumexp") return ReduceKind::kLogSumExp;
  return std::nullopt;
}

bool AllFloat(absl::Span<const Tensor* const> inputs, const Tensor& out) {
  if (out.dtype() != DType::kFloat32) return false;
  for (const Tensor* t : inputs) {
    if (t == nullptr || t->dtype() != DType::kFloat32) return false;
  }
  return true;
}

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
// it is of another kind (the reference kernels report it).
std::optional<float> Epsilon(const v1::Op& op) {
  auto it = op.attrs().find("epsilon");
  if (it == op.attrs().end()) return 1e-6f;
  if (it->second.value_case() == v1::AttrValue::kF) return it->second.f();
  if (it->second.value_case() == v1::AttrValue::kI) return static_cast<float>(it->second.i());
  return std::nullopt;
}

std::vector<std::string> Dims(const v1::Op& op) { return {op.dims().begin(), op.dims().end()}; }

// Binary ops and where: the inputs, or the inputs plus attrs.scalar as a 0-d tensor (see
// core/ops_math.h). Returns nullopt for a malformed op (the reference kernels report it).
std::optional<absl::Status> RunBinaryOrWhere(const v1::Op& op,
                                             absl::Span<const Tensor* const> inputs, Tensor* out,
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

// Returns nullopt when the op should go to the reference kernels instead.
std::optional<absl::Status> RunFast(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                    Tensor* out) {
  // The reference kernels own the error messages for wrong dtypes, arities and attributes.
  if (!AllFloat(inputs, *out)) return std::nullopt;
  const std::string& type = op.type();
  if (type == "einsum" && !inputs.empty()) return kernels::Einsum(inputs, out);
  if (auto b = BinaryOpOf(type)) return RunBinaryOrWhere(op, inputs, out, b);
  if (type == "where") return RunBinaryOrWhere(op, inputs, out, std::nullopt);
  if (auto u = UnaryOpOf(op); u && inputs.size() == 1) {
    float scalar = 0.0f;
    if (*u == kernels::UnaryOp::kScale) {
      if (!Scalar(op)) return std::nullopt;
      scalar = *Scalar(op);
    }
    return kernels::Unary(*u, scalar, *inputs[0], out);
  }
  if (auto r = ReduceKindOf(type); r && inputs.size() == 1) {
    return kernels::Reduce(*r, *inputs[0], out);
  }
  if ((type == "softmax" || type == "log_softmax") && inputs.size() == 1) {
    return kernels::Softmax(*inputs[0], Dims(op), type == "log_softmax", out);
  }
  // The executor's fused add + softmax (runtime/executor_fusion.h): softmax(inputs[0] + inputs[1]).
  if ((type == "_add_softmax" || type == "_add_log_softmax") && inputs.size() == 2) {
    return kernels::AddSoftmax(*inputs[0], *inputs[1], Dims(op), type == "_add_log_softmax", out);
  }
  if ((type == "layer_norm" || type == "rms_norm") && !inputs.empty() && inputs.size() <= 3) {
    const std::optional<float> epsilon = Epsilon(op);
    if (!epsilon) return std::nullopt;
    const bool rms = type == "rms_norm";
    if (rms && inputs.size() > 2) return std::nullopt;
    return kernels::Normalize(*inputs[0], inputs.size() > 1 ? inputs[1] : nullptr,
                              inputs.size() > 2 ? inputs[2] : nullptr, Dims(op), *epsilon, rms,
                              out);
  }
  if ((type == "layer_norm_grad" || type == "rms_norm_grad") &&
      (inputs.size() == 2 || inputs.size() == 3)) {
    const std::optional<float> epsilon = Epsilon(op);
    if (!epsilon) return std::nullopt;
    return kernels::NormGrad(*inputs[0], inputs.size() == 3 ? inputs[1] : nullptr, *inputs.back(),
                             Dims(op), *epsilon, type == "rms_norm_grad", out);
  }
  if (type == "softmax_grad" && inputs.size() == 2) {
    return kernels::SoftmaxGrad(*inputs[0], *inputs[1], Dims(op), out);
  }
  if (type == "softmax_cross_entropy" && inputs.size() == 2) {
    return kernels::SoftmaxCrossEntropy(*inputs[0], *inputs[1], out);
  }
  return std::nullopt;
}

class CpuRunner : public KernelRunner {
 public:
  using KernelRunner::Run;
  absl::Status Run(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* output,
                   const KernelContext& context) const override {
    if (output == nullptr) return ReferenceKernels().Run(op, inputs, output, context);
    for (const Tensor* in : inputs) {
      // Reductions of empty tensors write nothing: their sums are the zeros of the fill.
      if (in != nullptr && in->num_elements() == 0) {
        if (output->dtype() == DType::kFloat32) {
          std::fill(output->f32(), output->f32() + output->num_elements(), 0.0f);
        } else {
          std::fill(output->i32(), output->i32() + output->num_elements(), 0);
        }
        break;
      }
    }
    std::optional<absl::Status> s = RunFast(op, inputs, output);
    if (!s.has_value()) return ReferenceKernels().Run(op, inputs, output, context);
    if (s->ok()) return *s;
    return absl::Status(s->code(),
                        absl::StrCat("op '", op.name(), "' (", op.type(), "): ", s->message()));
  }

  absl::Status RunEinsumAccumulate(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                   float alpha, Tensor* output) const override {
    if (op.type() != "einsum") {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op.name(), "' is a ", op.type(), ", not an einsum"));
    }
    const absl::Status s = kernels::EinsumAccumulate(inputs, alpha, output);
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat("op '", op.name(), "' (einsum): ", s.message()));
  }
};

}  // namespace

const KernelRunner& CpuKernels() {
  static const KernelRunner* const runner = new CpuRunner();
  return *runner;
}

}  // namespace meshrt
