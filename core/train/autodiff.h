// Reverse-mode autodiff over a mesh graph, as Mesh-TensorFlow does it: the gradient is more ops in
// the same graph, so gradients obey the same layout rules — e.g. the gradient of a weight used in
// an einsum over a split `batch` dim is an einsum reducing `batch`, whose allreduce is the
// data-parallel gradient synchronisation, with nothing special-cased.
//
// Every op the registry marks differentiable has a rule: its record's gradient facet
// (OpInfo::gradient, core/ops/gradient.h; the rules are in core/ops/gradients_<family>.cc), written with
// existing ops so it lowers like any op:
//   elementwise  add sub mul div pow maximum minimum (broadcast by name; every scalar-operand form,
//                scalar_first too; maximum/minimum ties go to x), neg scale relu abs exp log sqrt
//                rsqrt reciprocal square tanh sigmoid gelu (tanh and erf forms), cast (float ->
//                float: identity), where (x and y; not the condition), dropout (the forward op's
//                mask: a dropout of dy with attrs.stream = the forward op's stream, ops_random.h)
//   reductions   einsum; reduce_sum reduce_mean reduce_logsumexp; reduce_max reduce_min (dy shared
//                by the elements equal to the extreme); softmax log_softmax softmax_cross_entropy;
//                layer_norm (x, scale, bias) rms_norm (x, scale), from reductions and elementwise ops
//   data         reshape rename_dim replace_dims (a reshape back); slice and split (pad back), pad
//                (slice), concat (a slice per input), stack (unstack) and unstack (an einsum with a
//                basis vector)
//   indexing     gather (weights: einsum(one_hot(indices), dy), or equal(indices, row_ids)),
//                top_k and sort values (einsum of dy with one_hot of the indices output), cumsum
//                (total - the cumsum of dy of the other exclusivity; carry: the total)
//   spatial      shift (by -offset), halo_exchange (slices of dy, the halos shifted one block back,
//                padded), conv1d conv2d (per filter tap: shifts, slices/pads and strided
//                replace_dims + unstack of x, einsums with dy; dx the transpose), avg_pool (dy
//                broadcast over the window by an einsum, reshaped), max_pool (that, masked by
//                x == upsampled max and shared among ties)
// Integer tensors (indices, conditions, int casts) take no gradient; comparisons, sign, one_hot,
// argmax, range and reduce_any/all pass back zero (OpInfo::zero_gradient). An op on the path from the variables to the loss
// without a rule (while_loop) gives Unimplemented naming the op (`meshrt ops` shows which ops have
// a gradient).
#ifndef MESHRT_CORE_TRAIN_AUTODIFF_H_
#define MESHRT_CORE_TRAIN_AUTODIFF_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/builder.h"

namespace meshrt {

// Adds to `b` the ops computing the gradient of sum(`loss`) with respect to each of `xs` (all made
// by `b`), and returns them in order. Each op a rule adds is named after the op it differentiates,
// "<op>/grad/<type>" (the seed "<loss>/grad/ones"), whatever b's name scope. An x that `loss` does not depend on gets zeros. Errors:
// InvalidArgument for a bad builder state or unknown tensor; Unimplemented for an op on the path
// without a gradient rule.
absl::StatusOr<std::vector<TensorRef>> Gradients(GraphBuilder& b, const TensorRef& loss,
                                                 const std::vector<TensorRef>& xs);

// Whether op type `type` has a gradient rule (OpInfo::gradient). The first call of this or
// Gradients CHECKs that the registry's gradient facets are consistent (CheckGradientFacets).
bool HasGradient(const std::string& type);

}  // namespace meshrt

#endif  // MESHRT_CORE_TRAIN_AUTODIFF_H_
