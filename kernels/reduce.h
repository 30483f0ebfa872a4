// Fast float32 reductions (reduce_sum, reduce_max, reduce_mean) with contiguous inner loops: each
// inner loop either folds one contiguous input row into a scalar or accumulates a contiguous
// input row into a contiguous output row. Dims are matched by name; every input dim not in the
// output is reduced.
//
// Pure functions over caller-owned buffers; thread-safe for disjoint outputs.
#ifndef MESHRT_KERNELS_REDUCE_H_
#define MESHRT_KERNELS_REDUCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace meshrt {
namespace kernels {

enum class ReduceKind { kSum, kMax, kMean };

// Validated entry point: `in` and `*out` float32, every output dim in `in` with the same size
// (InvalidArgument naming the dim otherwise). The output's dims may be in any order.
absl::Status Reduce(ReduceKind kind, const Tensor& in, Tensor* out);

// Unvalidated core on raw buffers. Preconditions: every dim of `out_shape` is in `in_shape` with
// the same size; buffers do not overlap. When the output order differs from the input's order
// it reduces into a temporary and permutes; `scratch_bytes` (optional) is increased by its size.
void ReduceRaw(ReduceKind kind, const float* in, const Shape& in_shape, float* out,
               const Shape& out_shape, int64_t* scratch_bytes = nullptr);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_REDUCE_H_
