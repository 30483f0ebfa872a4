// Fast elementwise kernels: binary ops with broadcasting by dim name, and unary ops. The hot loops
// are contiguous (or a contiguous operand against a broadcast scalar) with no index arithmetic per
// element; identical shapes take a single flat loop.
//
// Pure functions; thread-safe for disjoint outputs.
#ifndef MESHRT_KERNELS_ELEMENTWISE_H_
#define MESHRT_KERNELS_ELEMENTWISE_H_

#include "absl/status/status.h"
#include "core/tensor.h"

namespace meshrt {
namespace kernels {

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMinimum, kMaximum };
enum class UnaryOp { kRelu, kExp, kNeg, kScale };

// out = a op b. Every dim of a and b must be an output dim with the same size (any order); dims an
// input lacks broadcast. Dtypes: all float32, or all int32 for everything but kDiv.
// InvalidArgument for mismatched dims or dtypes; Unimplemented for int32 division.
absl::Status Binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor* out);

// out = f(x) for relu, exp, neg, or x * scalar (kScale; `scalar` is ignored otherwise). `x` must
// have exactly the output's dims (any order) and both must be float32; InvalidArgument otherwise.
absl::Status Unary(UnaryOp op, float scalar, const Tensor& x, Tensor* out);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_ELEMENTWISE_H_
