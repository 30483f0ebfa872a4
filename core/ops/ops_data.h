// The data-movement op family: replace_dims, slice, pad, concat, split, stack, unstack.
//
// Attribute conventions (shared with the index family, core/ops/ops_index.h):
//   - `dims` names dims the op works on that exist in its input(s).
//   - attrs `new_dim` (s) names a dim the op creates whose size it derives (slice, pad, concat,
//     split, stack, top_k). Where the op keeps the dim's position, the new dim takes it. When
//     `new_dim` is absent the output dim keeps the input dim's name, which is legal only when its
//     size does not change (a dim name means one size in a graph; the error says to set
//     `new_dim`).
//   - `shape` lists dims the op introduces whose sizes come from nowhere else (replace_dims'
//     replacement dims, one_hot's depth, range's dim).
//   - One output per op; an op with several results in Mesh-TensorFlow takes an attribute choosing
//     one (split `index`, unstack `index`, top_k/sort `output`).
//
// Ops (float32 or int32 data; the output has the input's dtype):
//   replace_dims  x; dims [d]; shape = dims replacing d, same total size, in d's place. A reshape.
//   slice         x; dims [d]; attrs {begin: i (default 0), size: i, new_dim?: s}.
//                 0 <= begin, 1 <= size, begin + size <= |d|.
//   pad           x; dims [d]; attrs {before: i, after: i (both >= 0, default 0), new_dim?: s};
//                 zero fill.
//   concat        x_1..x_k; dims = one name (every input has that dim) or k names (input i is
//                 concatenated along dims[i]); attrs {new_dim: s}. The output is x_1's dims with
//                 its concat dim replaced by new_dim (sum of the sizes); the other dims of every
//                 input must be x_1's (any order).
//   split         x; dims [d]; attrs {index: i, num: i} (equal pieces) or {index: i, sizes: ints}
//                 (pieces of the given sizes, summing to |d|); attrs new_dim?: s. Piece `index`.
//   stack         x_1..x_k, one shape; attrs {new_dim: s, axis: i (position of new_dim in the
//                 output, 0..rank, default 0)}. new_dim has size k.
//   unstack       x; dims [d]; attrs {index: i}. x at position `index` of d, without d.
//
// Lowering (core/ops/lower_data.cc). A dim not split by the layout: the op runs locally, and the
// output is sliced locally to its rule layout (no communication). Where Mesh-TensorFlow refused a
// split dim, meshrt reshards: the input is gathered along that dim (allgather over its mesh dim,
// through ProgramBuilder::Reshard), the op runs locally, and the output is sliced locally to its
// rule layout. Cheaper paths: slice/split/unstack of a range that one processor's part holds is a
// local cut and a broadcast from that processor (size elements per row, not the whole dim); a slice
// of the whole dim, or a pad by nothing, is a rename (a reshard); stack never communicates.
//
// The kernels never depend on where their slice sits (no `needs_slice_begin`).
#ifndef MESHRT_CORE_OPS_OPS_DATA_H_
#define MESHRT_CORE_OPS_OPS_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ops/ops.h"

namespace meshrt {

// ---- helpers shared by the data and index families ---------------------------------------------

// `shape` without the dim called `name` (unchanged when absent).
Shape WithoutDim(const Shape& shape, const std::string& name);
// `shape` with dim `i` replaced by `dims` (in place).
Shape ReplaceDim(const Shape& shape, int i, const std::vector<Dim>& dims);
// The dim `op.dims(0)` of `in` (the op's input `what`): its index. InvalidArgument naming the op
// when `dims` is empty or the input lacks it.
absl::StatusOr<int> OpDimIndex(const v1::Op& op, const Shape& in, int input = 0);
// The name of the dim an op makes from `old` (size `old_size`) with size `new_size`: attrs.new_dim
// if set, else `old`. InvalidArgument when that keeps the name but changes the size, or when the
// name is another dim of `in`.
absl::StatusOr<std::string> NewDimName(const v1::Op& op, const Shape& in, const std::string& old,
                                       int64_t old_size, int64_t new_size);
// InvalidArgument "op 'n' (type): msg".
absl::Status DataOpError(const v1::Op& op, absl::string_view msg);

// The range of the op's dim (size `n`) that slice or split keeps. InvalidArgument naming the op for
// bad attributes.
struct DimRange {
  int64_t begin = 0;
  int64_t size = 0;
};
absl::StatusOr<DimRange> KeptRange(const v1::Op& op, int64_t n);

// ---- lowering helpers shared with lower_index.cc (defined in lower_data.cc) ---------------------

// `layout` with tensor dim `dim` split over `axis` (kReplicated: whole).
TensorLayout WithAxis(TensorLayout layout, int dim, int axis);
// `t` with tensor dim `dim` whole on every processor (allgather over its mesh dim if split).
absl::StatusOr<LaidOutTensor> WholeAlong(LoweringContext& ctx, const LaidOutTensor& t, int dim,
                                         const v1::Op& op);
// Runs `local` on `inputs`, producing `op`'s output (graph type) with its dim `out_dim` whole (-1:
// none) and every other dim as the rules say, then reshards to the output's rule layout.
absl::StatusOr<LaidOutTensor> LocalThenRule(LoweringContext& ctx, const v1::Op& op,
                                            const v1::Op& local,
                                            const std::vector<LaidOutTensor>& inputs, int out_dim);
// A local `slice` op standing for `op` (same name): elements [begin, begin + size) of `dim`, named
// `new_dim` in the output.
v1::Op LocalSliceOp(const v1::Op& op, const std::string& dim, int64_t begin, int64_t size,
                    const std::string& new_dim);

// ---- hooks (OpInfo), defined in ops_data_kernels.cc and lower_data.cc --------------------------

absl::Status ReplaceDimsKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status SliceKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status PadKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status ConcatKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status StackKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status UnstackKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);

// slice and split
absl::StatusOr<LaidOutTensor> LowerSliceOp(LoweringContext& ctx, const v1::Op& op,
                                           const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerPadOp(LoweringContext& ctx, const v1::Op& op,
                                         const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerConcatOp(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerStackOp(LoweringContext& ctx, const v1::Op& op,
                                           const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerUnstackOp(LoweringContext& ctx, const v1::Op& op,
                                             const std::vector<LaidOutTensor>& inputs);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OPS_DATA_H_
