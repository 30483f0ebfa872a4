// Fast float32 kernel of the fused normalisation gradients layer_norm_grad and rms_norm_grad
// (core/ops/ops_math.h): the gradient w.r.t. x of layer_norm / rms_norm in one op, which autodiff emits
// instead of ~15 primitive ops. Per row (one index of the kept dims) it makes a few passes over
// the row, which stays in cache, so x and dy are read from memory once and dx written once.
//
// Pure functions over caller-owned buffers; thread-safe for disjoint outputs.
#ifndef MESHRT_KERNELS_NORM_GRAD_H_
#define MESHRT_KERNELS_NORM_GRAD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/ir/tensor.h"

namespace meshrt {
namespace kernels {

// dx of layer_norm (rms = false) or rms_norm (rms = true) over `dims`, into `*out`. With
// g = dy * scale (dy when `scale` is null), r = 1 / sqrt(mean(xc^2) + epsilon), xc = x - mean(x)
// (layer) or x (rms), xhat = xc r, means over `dims`:
//   layer: dx = r (g - mean(g) - xhat mean(g xhat));  rms: dx = r (g - xhat mean(g xhat)).
// Preconditions, checked: x, dy and *out float32 with one shape (same dims, same order); `dims`
// non-empty, distinct, each a dim of x; scale (optional, not owned) float32 whose dims are among
// `dims` with x's sizes, in any order (broadcast over the normalised dims it lacks).
// InvalidArgument naming the tensor and dim otherwise (Unimplemented for another dtype).
// Unchecked: *out shares no storage with x, dy or scale. Accumulates in float (16 lanes,
// kernels/fast_math.h), as kernels::Normalize does.
absl::Status NormGrad(const Tensor& x, const Tensor* scale, const Tensor& dy,
                      const std::vector<std::string>& dims, float epsilon, bool rms, Tensor* out);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_NORM_GRAD_H_
