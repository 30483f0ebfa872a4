// The cost facet of the op registry: FLOPs and bytes of one local slice of an op, as the cost model
// (core/planning/cost_model.h) and `meshrt explain` count them.
//
// Bytes: every input slice is read once and the output slice written once (float32 and int32 are
// 4 bytes). FLOPs, by family (OpInfo::cost overrides the default where it is wrong):
//   einsum         with n >= 2 operands: 2 x (product of the sizes of every distinct dim of the
//                  operands and the output) x (n - 1), what a GEMM-based einsum executes (the
//                  count of bench/train_flops.h GraphGemmFlops); one operand: one per input
//                  element when it sums dims away, zero for a pure transpose or broadcast
//   elementwise    one per output element per input beyond the first (at least one; attrs.scalar
//                  counts as no input); overrides: kTranscendentalFlops per output element for
//                  exp, log, tanh, sigmoid, gelu, pow (a vectorised polynomial plus range
//                  reduction), kDivideFlops for div, sqrt, rsqrt, reciprocal; dropout 2 (a
//                  compare and a scale; its hash is counted in kRandomFlops)
//   reduce         one per input element; overrides for the composites of the family, per element
//                  of the first input: softmax, log_softmax, softmax_cross_entropy
//                  kSoftmaxFlops (max, subtract, exp, sum, divide); layer_norm, rms_norm
//                  kNormFlops (mean, subtract, square, sum, scale, gain, bias); softmax_grad 4;
//                  layer_norm_grad, rms_norm_grad kNormGradFlops; reduce_logsumexp
//                  kSoftmaxFlops
//   reshape, data  zero FLOPs; bytes moved: the output slice is read and written (a slice reads
//                  only what it keeps, a concat all of its inputs)
//   index          one per element of the larger of the first input and the output (a compare
//                  or an add per element touched; sort and top_k are counted as one pass, not
//                  n log n)
//   spatial        shift, halo exchange: zero FLOPs; conv: 2 x output elements x (filter
//                  elements / output channels); pools: one per input element
//   source         zero FLOPs, the output written (placeholders and variables are not computed:
//                  zero bytes); random_uniform, random_normal: kRandomFlops per element;
//                  assign_add one per element
//   control        zero (a while_loop's body is not counted)
// Thread-safety: pure functions.
#ifndef MESHRT_CORE_OPS_OP_COST_H_
#define MESHRT_CORE_OPS_OP_COST_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/ops.h"

namespace meshrt {

inline constexpr int kTranscendentalFlops = 10;
inline constexpr int kDivideFlops = 4;
inline constexpr int kSoftmaxFlops = 16;
inline constexpr int kNormFlops = 8;
inline constexpr int kNormGradFlops = 12;
inline constexpr int kRandomFlops = 12;

// Bytes of a slice of `type` (4 per element).
int64_t SliceBytes(const TensorType& type);

// The cost of one slice of `op`: its OpInfo::cost when set, else its family's default (above).
// InvalidArgument naming the op when its type is not registered.
absl::StatusOr<SliceCost> OpSliceCost(const v1::Op& op, const std::vector<TensorType>& inputs,
                                      const TensorType& output);

// The family default of `family` (what OpSliceCost uses without an override).
SliceCost FamilyDefaultCost(OpFamily family, const v1::Op& op,
                            const std::vector<TensorType>& inputs, const TensorType& output);

// Overrides the families register (OpInfo::cost): kFlops per output element, every input read.
template <int kFlops>
SliceCost PerOutputElementCost(const v1::Op& op, const std::vector<TensorType>& inputs,
                               const TensorType& output);
// kFlops per element of the first input, every input read.
template <int kFlops>
SliceCost PerInputElementCost(const v1::Op& op, const std::vector<TensorType>& inputs,
                              const TensorType& output);
// Convolution: 2 x output elements x (filter elements / output channels); inputs x, filter with
// the output channels last.
SliceCost ConvCost(const v1::Op& op, const std::vector<TensorType>& inputs,
                   const TensorType& output);

// ---- implementation of the templates ----
namespace cost_internal {
SliceCost ReadAllWriteOutput(const std::vector<TensorType>& inputs, const TensorType& output,
                             double flops);
}  // namespace cost_internal

template <int kFlops>
SliceCost PerOutputElementCost(const v1::Op&, const std::vector<TensorType>& inputs,
                               const TensorType& output) {
  return cost_internal::ReadAllWriteOutput(
      inputs, output, kFlops * static_cast<double>(output.shape.num_elements()));
}

template <int kFlops>
SliceCost PerInputElementCost(const v1::Op&, const std::vector<TensorType>& inputs,
                              const TensorType& output) {
  const double n = inputs.empty() ? 0 : static_cast<double>(inputs[0].shape.num_elements());
  return cost_internal::ReadAllWriteOutput(inputs, output, kFlops * n);
}

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OP_COST_H_
