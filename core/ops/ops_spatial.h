// Internal to //core: the spatial op family (ops_spatial_shift.cc, ops_spatial_conv.cc and their
// lowerings lower_spatial_shift.cc, lower_spatial_conv.cc). Users see the ops through the registry
// (core/ops/ops.h, `meshrt ops`); the conventions are listed here once.
//
//   shift(x)          dims [d]; attrs {offset: i, wrap: b = false}. float32 or int32.
//                     y[.., i, ..] = x[.., i - offset, ..]: a positive offset moves data towards
//                     higher indices. A source position off the dim reads 0 (wrap false) or is
//                     taken modulo the dim's size (wrap true).
//   halo_exchange(x)  dims [blocks_dim, block_dim]; attrs {halo: i, wrap: b = false,
//                     output_dim: s = "<block_dim>_halo"}. float32 or int32.
//                     Mesh-TensorFlow's blocked convention: a spatial dim of nb*b positions is held
//                     as blocks_dim (nb blocks) x block_dim (b positions per block); blocks_dim is
//                     the one a layout splits. The output replaces block_dim, in place, by
//                     output_dim of size b + 2*halo: block k gets the last `halo` positions of
//                     block k-1, its own b, then the first `halo` of block k+1 — zeros past the
//                     first and the last block, or wrapping around with wrap true. 0 <= halo <= b.
//   conv1d(x, filter), conv2d(x, filter)                                        float32
//                     dims = x's spatial dims (1 or 2, in order). filter's dims are, in order, one
//                     window dim per spatial dim, in_channels (a dim of x) and out_channels (not a
//                     dim of x). Every other dim of x is a batch dim. The output has x's dims in
//                     x's order, in_channels replaced by out_channels and each spatial dim by its
//                     output dim. attrs {padding: "SAME" | "VALID" = "SAME", strides: ints = 1s,
//                     output_dims: strings}.
//                       out[o] = sum over window j and channel c of x[o*s + j - p][c] * f[j][c]
//                     (cross-correlation, as TensorFlow; positions off x read 0). SAME: output
//                     size ceil(n/s), p = floor(max(0, (O-1)*s + k - n) / 2). VALID: output size
//                     floor((n - k)/s) + 1 (n >= k), p = 0.
//   max_pool(x), avg_pool(x)                                                     float32
//                     dims = spatial dims (one or more); attrs {ksize: ints, one per dim;
//                     strides: ints, must equal ksize (non-overlapping windows); output_dims}.
//                     VALID windows: output size floor(n/k); out[o] = max or mean of
//                     x[o*k, o*k+k).
//   Output spatial dim names (conv and pool): output_dims[i] when given; otherwise the input dim's
//   name when its size is unchanged, else "<name>_out".
//
// Internal ops (only lowerings emit them; a graph using them is refused):
//   _dim_range(x)     dims [d]; attrs {begin: i, size: i}: positions [begin, begin+size) of d.
//   _dim_concat(xs)   dims [d]: the inputs (same rank and dim order) concatenated along d's
//                     position; the output dim at that position may have another name.
//   Convolutions run locally with attrs {_pad_before: ints}, which overrides the padding computed
//   from `padding` (a halo-extended slice needs none).
//
// Lowering (see lower_spatial_*.cc for the reasoning):
//   shift             d whole: local. d split over mesh dim m (blocks of b): offset = q*b + r;
//                     output block p = last r of block p-q-1 ++ first b-r of block p-q, i.e. two
//                     permutes along m (one when r = 0) and a local concat.
//   halo_exchange     block_dim made whole; blocks_dim whole: local. blocks_dim split: the edges
//                     (halo positions) shifted by one block each way as above, then concatenated.
//   conv              a split spatial dim whose output blocks line up with its input blocks
//                     (output size * stride = n, stride divides the block, halos within one
//                     block) gets halos from both neighbours by permute, then a local VALID conv;
//                     other split spatial dims are gathered first. Split in_channels: local conv
//                     is a partial sum, resolved by Reshard (allreduce or reduce-scatter).
//   pool              a split spatial dim whose blocks are whole windows (k divides the block)
//                     stays split; otherwise it is gathered first.
//
// Thread-compatible pure functions.
#ifndef MESHRT_CORE_OPS_OPS_SPATIAL_H_
#define MESHRT_CORE_OPS_OPS_SPATIAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/program_builder.h"
#include "core/ir/shape.h"
#include "core/ops/ops.h"
#include "proto/graph.pb.h"

namespace meshrt {

struct LoweringContext;

namespace spatial {

// Errors: meshrt::OpError (core/ops/ops.h), found from this namespace.

// Geometry of a conv or pool over whole (global) tensors, from the op and its input shapes.
struct WindowSpec {
  std::vector<int> x_spatial;           // index in x of each spatial dim
  std::vector<int64_t> window;          // k per spatial dim
  std::vector<int64_t> stride;          // s per spatial dim
  std::vector<int64_t> pad_before;      // p per spatial dim
  std::vector<int64_t> output_size;     // O per spatial dim
  std::vector<std::string> output_dim;  // output dim name per spatial dim
  int x_in = -1;                        // conv: index in x of in_channels
  std::string out_channels;             // conv: name of out_channels
  Shape output;                         // the output shape
};

// For conv1d/conv2d: `x` and `filter` are the input shapes. Errors name the op and the dim.
absl::StatusOr<WindowSpec> ConvSpec(const v1::Op& op, const Shape& x, const Shape& filter);
// For max_pool/avg_pool.
absl::StatusOr<WindowSpec> PoolSpec(const v1::Op& op, const Shape& x);

// Builders of the local ops lowerings emit; each is named `source_op` (the graph op).
v1::Op DimRangeOp(const std::string& source_op, const std::string& dim, int64_t begin,
                  int64_t size);
v1::Op DimConcatOp(const std::string& source_op, const std::string& dim);
v1::Op ShiftOp(const std::string& source_op, const std::string& dim, int64_t offset, bool wrap);

// Lowering building blocks (lower_spatial_shift.cc), on laid-out tensors whose `dim` may be split.

// Shifts `x` along tensor dim `dim` by `offset` (shift's semantics). Keeps x's shape and layout.
// A split dim moves by permutes along its mesh dim (see the file comment).
absl::StatusOr<LaidOutTensor> ShiftLaidOut(LoweringContext& ctx, const LaidOutTensor& x, int dim,
                                           int64_t offset, bool wrap, const std::string& source_op);

// `x`'s `dim` is split over a mesh dim of size g in blocks of b. Extends every processor's block
// with the `before` positions that precede it and the `after` that follow it (zeros past the ends,
// or wrapped around with `wrap`), by permutes with the neighbours. The result's global dim size is
// (b + before + after) * g, so its slice is the extended block. Errors: InvalidArgument naming
// `source_op` and the dim unless 0 <= before, after <= b; Internal if `dim` is not split.
absl::StatusOr<LaidOutTensor> ExtendWithHalo(LoweringContext& ctx, const LaidOutTensor& x, int dim,
                                             int64_t before, int64_t after, bool wrap,
                                             const std::string& source_op);

// Lowerings (OpInfo::lower).
absl::StatusOr<LaidOutTensor> LowerShift(LoweringContext& ctx, const v1::Op& op,
                                         const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerHaloExchange(LoweringContext& ctx, const v1::Op& op,
                                                const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerConv(LoweringContext& ctx, const v1::Op& op,
                                        const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerPool(LoweringContext& ctx, const v1::Op& op,
                                        const std::vector<LaidOutTensor>& inputs);

}  // namespace spatial
}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OPS_SPATIAL_H_
