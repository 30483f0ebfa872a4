// Fast elementwise kernels: binary ops and `where` with broadcasting by dim name, and unary ops.
// The hot loops are contiguous (or a contiguous operand against a broadcast scalar) with no index
// arithmetic per element; identical shapes take a single flat loop. Semantics match the reference
// kernels (core/ops/ops_math.h), which compute in double: results agree to float rounding.
//
// Pure functions; thread-safe for disjoint outputs.
#ifndef MESHRT_KERNELS_ELEMENTWISE_H_
#define MESHRT_KERNELS_ELEMENTWISE_H_

#include "absl/status/status.h"
#include "core/ir/tensor.h"

namespace meshrt {
namespace kernels {

enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMinimum,
  kMaximum,
  kPow,
  // Predicates: float32 1 where true, else 0, whatever the inputs' dtype. Logical ops treat
  // nonzero as true.
  kEqual,
  kLess,
  kGreater,
  kLogicalAnd,
  kLogicalOr,
};

enum class UnaryOp {
  kRelu,
  kExp,
  kNeg,
  kScale,  // x * scalar
  kLog,
  kSqrt,
  kRsqrt,
  kSquare,
  kTanh,
  kSigmoid,
  kGelu,     // tanh approximation (Mesh-TensorFlow's)
  kGeluErf,  // exact: x * Phi(x)
  kAbs,
  kSign,
  kReciprocal,
};

// out = a op b. Every dim of a and b must be an output dim with the same size (any order); dims an
// input lacks broadcast (a 0-d input is a scalar). a and b have one dtype, float32 or int32 (int32
// not for kDiv, kPow); out has that dtype, or float32 for predicates. InvalidArgument for
// mismatched dims or dtypes; Unimplemented for int32 kDiv and kPow.
absl::Status Binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor* out);

// out = cond != 0 ? x : y, all three broadcast by name as in Binary. cond float32 or int32; x, y
// and out one dtype (float32 or int32). InvalidArgument for mismatched dims or dtypes.
absl::Status Where(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor* out);

// out = f(x); `scalar` is used by kScale only. `x` must have exactly the output's dims (any order)
// and both must be float32; InvalidArgument for other dims, Unimplemented for other dtypes.
absl::Status Unary(UnaryOp op, float scalar, const Tensor& x, Tensor* out);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_ELEMENTWISE_H_
