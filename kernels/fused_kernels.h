// The kernels of the executor's fused ops (core/ir/step_fusion.h FusedInstruction), in the
// fast-kernel table (fast_kernels.h) like any fast kernel: one pass over what a group of local ops
// computes, with the bits of the ops one by one.
//
//   _scaled_einsum_add  (x, s, einsum inputs...) attr sign: x + sign * s * einsum(...), in the
//                       einsum's GEMM with beta = 1 (SGD's w - lr * grad, the gradient never
//                       written out)
//   _scaled_add         (x, m0, m1) attr sign: x + sign * (y * s), s whichever of m0, m1 is a
//                       scalar, the product rounded first (kernels::ScaledAdd)
//   _masked_mul         (dy, x) attr scalar: dy * (x > scalar ? 1 : 0) (a ReLU's gradient)
//
// (_add_softmax and _add_log_softmax are reduce.h's AddSoftmax.) Each returns InvalidArgument for
// operands it does not take (a non-scalar s, shapes that differ from the output's, a missing
// attr); the executor then runs the group's ops one by one, which report their own errors. Only
// float32 reaches them (RunFastKernel). Thread-safe: pure.
#ifndef MESHRT_KERNELS_FUSED_KERNELS_H_
#define MESHRT_KERNELS_FUSED_KERNELS_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/ir/tensor.h"
#include "proto/graph.pb.h"

namespace meshrt {
namespace kernels {

std::optional<absl::Status> ScaledEinsumAdd(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                            Tensor* out);
std::optional<absl::Status> ScaledAddOp(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                        Tensor* out);
std::optional<absl::Status> MaskedMul(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                      Tensor* out);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_FUSED_KERNELS_H_
