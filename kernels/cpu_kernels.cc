#include "kernels/cpu_kernels.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/einsum.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace meshrt {
namespace {

std::optional<kernels::BinaryOp> BinaryOpOf(const std::string& type) {
  if (type == "add") return kernels::BinaryOp::kAdd;
  if (type == "sub") return kernels::BinaryOp::kSub;
  if (type == "mul") return kernels::BinaryOp::kMul;
  if (type == "div") return kernels::BinaryOp::kDiv;
  if (type == "minimum") return kernels::BinaryOp::kMinimum;
  if (type == "maximum") return kernels::BinaryOp::kMaximum;
  return std::nullopt;
}

std::optional<kernels::UnaryOp> UnaryOpOf(const std::string& type) {
  if (type == "relu") return kernels::UnaryOp::kRelu;
  if (type == "exp") return kernels::UnaryOp::kExp;
  if (type == "neg") return kernels::UnaryOp::kNeg;
  if (type == "scale") return kernels::UnaryOp::kScale;
  return std::nullopt;
}

std::optional<kernels::ReduceKind> ReduceKindOf(const std::string& type) {
  if (type == "reduce_sum") return kernels::ReduceKind::kSum;
  if (type == "reduce_max") return kernels::ReduceKind::kMax;
  if (type == "reduce_mean") return kernels::ReduceKind::kMean;
  return std::nullopt;
}

bool AllFloat(absl::Span<const Tensor* const> inputs, const Tensor& out) {
  if (out.dtype() != DType::kFloat32) return false;
  for (const Tensor* t : inputs) {
    if (t == nullptr || t->dtype() != DType::kFloat32) return false;
  }
  return true;
}

// Returns nullopt when the op should go to the reference kernels instead.
std::optional<absl::Status> RunFast(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                    Tensor* out) {
  // The reference kernels own the error messages for wrong dtypes, arities and attributes.
  if (!AllFloat(inputs, *out)) return std::nullopt;
  const std::string& type = op.type();
  if (type == "einsum" && !inputs.empty()) return kernels::Einsum(inputs, out);
  if (auto b = BinaryOpOf(type); b && inputs.size() == 2) {
    return kernels::Binary(*b, *inputs[0], *inputs[1], out);
  }
  if (auto u = UnaryOpOf(type); u && inputs.size() == 1) {
    float scalar = 0.0f;
    if (*u == kernels::UnaryOp::kScale) {
      auto it = op.attrs().find("scalar");
      if (it == op.attrs().end() || it->second.value_case() != v1::AttrValue::kF) {
        return std::nullopt;
      }
      scalar = it->second.f();
    }
    return kernels::Unary(*u, scalar, *inputs[0], out);
  }
  if (auto r = ReduceKindOf(type); r && inputs.size() == 1) {
    return kernels::Reduce(*r, *inputs[0], out);
  }
  return std::nullopt;
}

class CpuRunner : public KernelRunner {
 public:
  absl::Status Run(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                   Tensor* output) const override {
    if (output == nullptr) return ReferenceKernels().Run(op, inputs, output);
    std::optional<absl::Status> s = RunFast(op, inputs, output);
    if (!s.has_value()) return ReferenceKernels().Run(op, inputs, output);
    if (s->ok()) return *s;
    return absl::Status(s->code(),
                        absl::StrCat("op '", op.name(), "' (", op.type(), "): ", s->message()));
  }
};

}  // namespace

const KernelRunner& CpuKernels() {
  static const KernelRunner* const runner = new CpuRunner();
  return *runner;
}

}  // namespace meshrt
