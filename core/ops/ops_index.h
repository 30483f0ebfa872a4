// The indexing op family: one_hot, gather, range, top_k, argmax, cumsum, sort. Attribute
// conventions as in core/ops/ops_data.h (`dims` = existing dims the op works on, attrs.new_dim = a dim
// it makes of a derived size, `shape` = dims it introduces, `output` picks one result).
//
// Ops (x: float32 or int32; indices and ids: int32):
//   one_hot  indices; shape = [depth:V]; dtype (default float32); attrs {on_value: f (1),
//            off_value: f (0)}. Output: indices' dims, then depth. Indices outside [0, V) give an
//            all-off row.
//   gather   weights, indices[, row_ids]; dims [d] (a dim of weights, not of indices). Output:
//            weights' dims with d replaced, in its place, by the indices' dims weights lacks; dims
//            in both are batch dims (each batch element reads its own weights). out = the row of
//            weights (along d) that the index selects; zeros for indices outside [0, |d|).
//            row_ids (int32 [d], consecutive): the ids of weights' rows, default 0..|d|-1 — the
//            lowering passes each processor the ids of the rows it holds.
//   range    no inputs; shape = [d:n]; dtype (default float32). out[i] = i.
//   top_k    x[, ids]; dims [d]; attrs {k: i (1..|d|), new_dim: s, output: "values" (default) |
//            "indices"}. Output: x's dims with d replaced by new_dim:k. The k largest along d in
//            descending order; ties go to the smaller index; NaN ranks above every number.
//            indices: positions along d, or, with ids (dims among x's), ids at those positions.
//   argmax   x[, ids]; dims [d]. int32 position (or id) of the largest along d (order as top_k).
//   cumsum   x[, carry]; dims [d]; attrs {exclusive: b (false)}. out[i] = carry + sum of x[j] for
//            j <= i (j < i when exclusive) along d. carry: x's dims without d (a d of size 1 is
//            accepted), default 0.
//   sort     x; dims [d]; attrs {descending: b (false), output: "values" (default) | "indices"}.
//            Stable (equal values keep their order); NaN ranks above every number. indices:
//            int32 positions along d.
//
// Lowering (core/ops/lower_index.cc), when the rules split the op's dim over mesh dim m (g parts):
//   one_hot  local; the kernel offsets indices by the slice's begin along depth
//            (`needs_slice_begin`). range: local, from the slice's begin. Neither communicates.
//   gather   local gather of the rows this slice holds (others zero), then one allreduce(sum) over
//            m. When m also splits an output dim, weights are gathered along d instead (allgather)
//            and the gather is local.
//   top_k    local top_k (min(k, |d|/g) candidates with their global indices), allgather of the
//            candidates over m, top_k of the g candidate lists. argmax: the same with one
//            candidate.
//   cumsum   local inclusive cumsum; each slice's total (one value per row) is allgathered over m;
//            an exclusive cumsum of the totals, sliced locally, is each slice's carry; a local
//            cumsum with that carry. No full gather.
//   sort     allgather of the dim over m, local sort, local slice to the output's layout. (A
//            distributed merge would need variable-sized exchanges the collectives lack; sorting
//            a split dim costs |d| elements per row on each processor.)
#ifndef MESHRT_CORE_OPS_OPS_INDEX_H_
#define MESHRT_CORE_OPS_OPS_INDEX_H_

#include <vector>

#include "absl/status/status.h"
#include "core/ops/ops.h"

namespace meshrt {

// Reference kernels (ops_index_kernels.cc).
absl::Status OneHotKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status GatherKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status RangeKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status TopKKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status ArgmaxKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status CumsumKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);
absl::Status SortKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out);

// Lowerings (lower_index.cc).
// one_hot, range
absl::StatusOr<LaidOutTensor> LowerLocalIndexOp(LoweringContext& ctx, const v1::Op& op,
                                                const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerGatherOp(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs);
// top_k, argmax
absl::StatusOr<LaidOutTensor> LowerTopKOp(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerCumsumOp(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerSortOp(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OPS_INDEX_H_
