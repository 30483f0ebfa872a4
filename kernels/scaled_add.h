// o = x + y * s over float arrays, the product rounded to float before the add (as a mul op then an
// add op compute it: never one fused multiply-add). The executor's fused SGD-style update
// (core/ir/step_fusion.h) runs it over whole variable slices.
//
// Large outputs (>= kStreamingBytes) are written with non-temporal (streaming) stores: the update
// is read again only at the next step, long after it has left the caches, so writing around them
// saves reading every output line first (measured on a 16 MiB slice of this project's machine:
// 4.0 ms -> 2.0 ms). Results are bitwise those of the scalar loop either way.
//
// Thread-safety: pure; `o` may alias `x` or `y` exactly (in place), not partially.
#ifndef MESHRT_KERNELS_SCALED_ADD_H_
#define MESHRT_KERNELS_SCALED_ADD_H_

#include <cstdint>

namespace meshrt {
namespace kernels {

inline constexpr int64_t kStreamingBytes = 4 << 20;

void ScaledAdd(const float* x, const float* y, float s, float* o, int64_t n);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_SCALED_ADD_H_
