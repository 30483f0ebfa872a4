// Fast float32 reductions (reduce_sum, _mean, _max, _min, _any, _all, _logsumexp) and the
// normalisations built on them (softmax, log_softmax, layer_norm, rms_norm, softmax_cross_entropy).
// Inner loops are contiguous: each folds one contiguous input row into a scalar or accumulates a
// contiguous input row into a contiguous output row; per-row statistics are broadcast back with
// PermuteCopy so the elementwise passes are flat loops. Dims are matched by name. Semantics match
// the reference kernels (core/ops/ops_math.h).
//
// Pure functions over caller-owned buffers; thread-safe for disjoint outputs.
#ifndef MESHRT_KERNELS_REDUCE_H_
#define MESHRT_KERNELS_REDUCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"

namespace meshrt {
namespace kernels {

// kAny / kAll write 1 when any / every reduced element is nonzero, else 0.
enum class ReduceKind { kSum, kMax, kMean, kMin, kAny, kAll, kLogSumExp };

// Validated entry point: `in` and `*out` float32, every output dim in `in` with the same size
// (InvalidArgument naming the dim otherwise); every input dim the output lacks is reduced. The
// output's dims may be in any order.
absl::Status Reduce(ReduceKind kind, const Tensor& in, Tensor* out);

// Unvalidated core on raw buffers. Preconditions: every dim of `out_shape` is in `in_shape` with
// the same size; buffers do not overlap. When the output order differs from the input's order
// it reduces into a temporary and permutes; `scratch_bytes` (optional) is increased by the size of
// every temporary.
void ReduceRaw(ReduceKind kind, const float* in, const Shape& in_shape, float* out,
               const Shape& out_shape, int64_t* scratch_bytes = nullptr);

// softmax (log = false) or log_softmax (log = true) of `x` over `dims`. `x` and `*out` float32
// with the same dims in the same order; `dims` non-empty, each a dim of x. InvalidArgument
// otherwise.
absl::Status Softmax(const Tensor& x, const std::vector<std::string>& dims, bool log, Tensor* out);

// Softmax (or log_softmax) of a + b over `dims` in one pass: the same bits as Binary(kAdd, a, b,
// &t) (elementwise.h) into a tensor t of *out's shape, then Softmax(t, dims, log, out), without
// writing t out. a and b broadcast by name into *out's shape as Binary broadcasts them (every dim
// of each is a dim of *out with the same size, in any order); each sum is a[..] + b[..] rounded
// to float, then the softmax's own arithmetic runs on it. When `dims` are *out's innermost dims
// each row is summed into a scratch row right before the row's softmax, an addend whose dims are
// in another order (e.g. a mask [memory, length] against logits [..., length, memory]) being
// permuted once first; otherwise the sum is materialised and Softmax runs on it.
// All float32 (Unimplemented otherwise); InvalidArgument for a dim of a or b that *out lacks, or
// a bad `dims` (as Softmax).
absl::Status AddSoftmax(const Tensor& a, const Tensor& b, const std::vector<std::string>& dims,
                        bool log, Tensor* out);

// layer_norm (rms = false): (x - mean) / sqrt(var + epsilon), or rms_norm (rms = true):
// x / sqrt(mean(x^2) + epsilon), over `dims`; then * scale and + bias when given (may be null;
// their dims must be dims of x, broadcast by name). Shapes and errors as Softmax.
absl::Status Normalize(const Tensor& x, const Tensor* scale, const Tensor* bias,
                       const std::vector<std::string>& dims, float epsilon, bool rms, Tensor* out);

// -sum of targets * log_softmax(logits) over the logits' dims that `*out` lacks. targets has the
// logits' dims (any order); out's dims are logits' other dims (any order). All float32.
// InvalidArgument otherwise.
// softmax_grad: y * (dy - sum over `dims` of dy * y). y, dy and out share one shape.
absl::Status SoftmaxGrad(const Tensor& y, const Tensor& dy, const std::vector<std::string>& dims,
                         Tensor* out);

absl::Status SoftmaxCrossEntropy(const Tensor& logits, const Tensor& targets, Tensor* out);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_REDUCE_H_
