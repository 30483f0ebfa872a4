// Reverse-mode autodiff over a mesh graph, as Mesh-TensorFlow does it: the gradient is more ops in
// the same graph, so gradients obey the same layout rules — e.g. the gradient of a weight used in
// an einsum over a split `batch` dim is an einsum reducing `batch`, whose allreduce is the
// data-parallel gradient synchronisation, with nothing special-cased.
//
// Gradient rules so far: einsum; add sub mul div (broadcast by name; the scalar-operand forms of
// add, sub and mul); neg scale relu exp log sqrt square tanh sigmoid; reduce_sum reduce_mean;
// softmax log_softmax softmax_cross_entropy; reshape rename_dim. Other ops on the path from the variables to the loss give Unimplemented
// naming the op (`meshrt ops` shows which ops have a gradient).
#ifndef MESHRT_CORE_AUTODIFF_H_
#define MESHRT_CORE_AUTODIFF_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/builder.h"

namespace meshrt {

// Adds to `b` the ops computing the gradient of sum(`loss`) with respect to each of `xs` (all made
// by `b`), and returns them in order. An x that `loss` does not depend on gets zeros. Errors:
// InvalidArgument for a bad builder state or unknown tensor; Unimplemented for an op on the path
// without a gradient rule.
absl::StatusOr<std::vector<TensorRef>> Gradients(GraphBuilder& b, const TensorRef& loss,
                                                 const std::vector<TensorRef>& xs);

// Whether `type` has a gradient rule here.
bool HasGradient(const std::string& type);

}  // namespace meshrt

#endif  // MESHRT_CORE_AUTODIFF_H_
