#include "kernels/cpu_kernels.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "kernels/fast_kernels.h"

namespace meshrt {
namespace {

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
    std::optional<absl::Status> s = RunFastKernel(op, inputs, output);
    if (!s.has_value()) {
      KernelContext with_runner = context;  // a loop's body runs on these kernels too
      if (with_runner.runner == nullptr) with_runner.runner = this;
      return ReferenceKernels().Run(op, inputs, output, with_runner);
    }
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
