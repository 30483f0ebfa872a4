// Layout changes for the fast kernels: permute (and broadcast) dense row-major buffers whose dims
// are matched by name. The einsum, elementwise and reduction kernels use these when an operand or
// result is not already in the order they need.
//
// Pure functions over caller-owned buffers; thread-safe for disjoint outputs.
#ifndef MESHRT_KERNELS_TRANSPOSE_H_
#define MESHRT_KERNELS_TRANSPOSE_H_

#include <cstdint>
#include <vector>

#include "core/ir/shape.h"

namespace meshrt {
namespace kernels {

// dst[idx] = src[idx restricted to src's dims], dims matched by name. Dims only in `dst_shape`
// broadcast. Preconditions (unchecked: callers validate shapes first): every dim of `src_shape` is
// in `dst_shape` with the same size; src and dst do not overlap. T is float or int32_t.
//
// Inner loops are contiguous copies or fills when the innermost dst dim is also innermost (or
// absent) in src; otherwise the two innermost dims are transposed in cache-sized tiles.
template <typename T>
void PermuteCopy(const T* src, const Shape& src_shape, T* dst, const Shape& dst_shape);

// `shape` without its size-1 dims (they do not change any layout).
Shape DropUnitDims(const Shape& shape);

// A dense index space after fusing: adjacent dims i, i+1 are merged when, for every operand k,
// strides[k][i] == strides[k][i+1] * sizes[i+1] (so one loop walks both). Size-1 dims are dropped.
struct FusedSpace {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;  // strides[operand][dim]
};
FusedSpace Fuse(const std::vector<int64_t>& sizes,
                const std::vector<std::vector<int64_t>>& strides);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_TRANSPOSE_H_
