// Internal to //core: helpers the math op family shares (ops_math_elementwise.cc,
// ops_math_reduce.cc, ops_math_norm.cc and lower_math.cc). Users see the ops through the registry
// (core/ops/ops.h, `meshrt ops`); the conventions are listed here once.
//
// Elementwise (family kElementwise; lowering: local, never communicates):
//   unary    exp log sqrt rsqrt tanh sigmoid reciprocal       float32
//            gelu   attrs {approximate: b = true}: tanh form (Mesh-TensorFlow's); false: exact erf
//            square abs sign neg relu                          float32 or int32
//            scale  attrs {scalar: f}: x * scalar              float32 (kept for old graphs;
//                                                              same as mul with a scalar)
//            cast   attrs {dtype: "float32"|"int32"} or the op's `dtype` field. float -> int32
//                   truncates toward zero, saturates at the int32 range, NaN -> 0.
//   binary   add sub mul minimum maximum                       float32 or int32
//            div pow                                           float32
//            equal less greater logical_and logical_or         float32 or int32 in, float32 0/1 out
//   where    where(cond, x, y): cond float32 or int32, nonzero = true; x, y one dtype (the
//   output's) Broadcasting by name: the output has every input dim, in order of first appearance
//   over the inputs (x's dims, then y's new dims); a dim in two inputs must have one size. Scalar
//   operand: a binary op or `where` may take its last operand as attrs {scalar: f} instead of an
//   input (`sub(x) {scalar: 1}` = x - 1, `where(c, x) {scalar: 0}` = where(c, x, 0)); with attrs
//   {scalar_first: true} a binary op takes the scalar as its first operand (1 - x). On int32
//   operands the scalar must be a whole number.
//
// Reductions (family kReduce), `dims` = reduced dims, none listed = every dim:
//   reduce_sum reduce_max reduce_min                           float32 or int32, same out
//   reduce_mean reduce_logsumexp                               float32
//   reduce_any reduce_all                                      float32 or int32 in (nonzero =
//   true),
//                                                              float32 0/1 out
//   Kernels reduce every input dim the output lacks (so slices work as whole tensors do).
//   Lowering: local reduce, then allreduce over the mesh dims of split reduced dims (sum for sum
//   and mean, max for max/any, min for min/all); logsumexp: local max, allreduce(max), local sum of
//   exp(x - max), allreduce(sum), log + max.
//
// Normalisation (family kReduce), `dims` = normalised dims (at least one), float32:
//   softmax log_softmax(x)                  same shape as x
//   layer_norm(x [, scale [, bias]])        (x - mean) / sqrt(var + epsilon) * scale + bias;
//                                           attrs {epsilon: f = 1e-6}; scale, bias: any dims of x
//   rms_norm(x [, scale])                   x / sqrt(mean(x^2) + epsilon) * scale
//   softmax_cross_entropy(logits, targets)  -sum over dims of targets * log_softmax(logits);
//                                           targets has logits' dims (any order); output = logits'
//                                           dims minus `dims` (the per-example loss)
//   softmax_grad(y, dy)                     y * (dy - sum over dims of dy * y); dy of y's shape
//   layer_norm_grad(x [, scale], dy)        dx of layer_norm: r (g - mean(g) - xhat mean(g xhat)),
//                                           g = dy * scale, xhat = (x - mean) r, r = rsqrt(var +
//                                           epsilon); attrs {epsilon: f = 1e-6}; dy of x's shape
//                                           exactly; scale over normalised dims only
//   rms_norm_grad(x [, scale], dy)          dx of rms_norm: r (g - xhat mean(g xhat)), xhat = x r
//   The *_grad ops are what autodiff emits (not differentiable themselves).
//   Lowering: one local op when no normalised dim is split; otherwise local pieces plus allreduces
//   over the mesh dims of the split normalised dims (never a gather of the whole dim).
//
// Thread-compatible pure functions.
#ifndef MESHRT_CORE_OPS_OPS_MATH_H_
#define MESHRT_CORE_OPS_OPS_MATH_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"
#include "core/ops/ops.h"
#include "proto/graph.pb.h"
#include "proto/program.pb.h"

namespace meshrt {
namespace math {

// Errors: meshrt::OpError (core/ops/ops.h), found from this namespace.

// ---- attributes -------------------------------------------------------------------------------

// Whether attrs {scalar} is present (as f or i).
bool HasScalar(const v1::Op& op);
// attrs {scalar} (f or i); InvalidArgument naming the op when absent or of another kind.
absl::StatusOr<double> ScalarAttr(const v1::Op& op);
// The dtype a cast produces: attrs {dtype: "float32"|"int32"} or op.dtype(); InvalidArgument when
// neither is given, the name is unknown, or the two disagree.
absl::StatusOr<DType> CastTarget(const v1::Op& op);

// ---- shapes -----------------------------------------------------------------------------------

// The output shape of a broadcast by name: every dim of `shapes`, in order of first appearance.
// InvalidArgument naming the op, the dim and both inputs when one name has two sizes.
absl::StatusOr<Shape> BroadcastShape(const v1::Op& op, const std::vector<Shape>& shapes);
// op.dims() checked against `x` (each must be a dim of x; no repeats). Empty dims mean every dim of
// x unless `need_one`, which makes an empty list an error. Errors name the op and x's shape.
absl::StatusOr<std::set<std::string>> ReducedDims(const v1::Op& op, const Shape& x, bool need_one);
// `s` without the dims named in `drop`, order kept.
Shape Without(const Shape& s, const std::set<std::string>& drop);

// ---- kernels ----------------------------------------------------------------------------------

// Typed access to a tensor's storage (T = float or int32_t; the dtype must match, CHECKed).
template <typename T>
const T* DataOf(const Tensor& t);
template <typename T>
T* MutableDataOf(Tensor* t);

// Element offsets in a tensor of shape `t` of every point of the row-major index space `space`
// (dims matched by name; a dim of `space` that `t` lacks contributes 0, i.e. broadcasts).
std::vector<int64_t> Offsets(const Shape& t, const Shape& space);

// Arity, non-null inputs and the given dtype on each input ("input i is int32 but ... needs
// float32"). InvalidArgument otherwise.
absl::Status CheckInputs(absl::Span<const Tensor* const> inputs, size_t min, size_t max);
absl::Status CheckFloat(const Tensor& t, absl::string_view what);

// For kernels that reduce: the reduced dims are the dims of `in` the output lacks. `kept` gets the
// output's dims (in the output's order), `reduced` the rest of `in` (in `in`'s order).
// InvalidArgument when an output dim is not in `in` with the same size.
absl::Status SplitReduce(const Shape& in, const Shape& out, Shape* kept, Shape* reduced);

// ---- a unary elementwise op from its math (ops_math_elementwise.cc; core/README.md "Adding an
// op": a new one is one file, e.g. ops_math_softsign.cc) --------------------------------------

// The per-element math of y = f(x): the reference computes in double and rounds once.
using UnaryMathFn = double (*)(double x);
// The reference kernel of y = f(x) elementwise (the output's dims in any order). int32 inputs are
// computed through double too, for an op whose dtype rule admits them.
absl::Status RunUnaryReference(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                               Tensor* out, UnaryMathFn f);
template <UnaryMathFn kF>
absl::Status UnaryReference(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                            Tensor* out) {
  return RunUnaryReference(op, inputs, out, kF);
}
// A fast kernel (OpInfo::fast) from a float32 loop over n contiguous elements: runs `kLoop` when
// the one input has the output's shape, else nullopt (the reference permutes).
using FloatLoopFn = void (*)(const float* x, float* y, int64_t n);
std::optional<absl::Status> RunFastUnary(absl::Span<const Tensor* const> inputs, Tensor* out,
                                         FloatLoopFn loop);
template <FloatLoopFn kLoop>
std::optional<absl::Status> FastUnary(const v1::Op&, absl::Span<const Tensor* const> inputs,
                                      Tensor* out) {
  return RunFastUnary(inputs, out, kLoop);
}
// The record of a unary elementwise op: one input, the output of its type, `dtypes` its rule,
// lowered locally (no communication), a one-FLOP-per-element cost. Callers add what differs:
// the reference (UnaryReference<f>), fast, cost, gradient, linear.
OpInfo UnaryOpInfo(const char* type, bool differentiable, const char* summary,
                   InputDTypes dtypes);
template <UnaryMathFn kF>
OpInfo UnaryOp(const char* type, bool differentiable, const char* summary, InputDTypes dtypes) {
  OpInfo info = UnaryOpInfo(type, differentiable, summary, dtypes);
  info.reference = &UnaryReference<kF>;
  return info;
}

// ---- lowerings (lower_math.cc) ----------------------------------------------------------------
// Each lowers one op whose inputs are in their rule layouts and leaves its output in the rule
// layout (OpInfo::lower; see core/ops/lower_ops.h).

// A reduction (lower_reduce.cc): local reduce, then `across` over the mesh dims of split reduced
// dims — for REDUCE_SUM a partial sum (LowerOp resolves it or keeps it lazy), scaled by 1/count
// for a `mean` (the local op is then a reduce_sum).
absl::StatusOr<LaidOutTensor> LowerReduction(LoweringContext& ctx, const v1::Op& op,
                                             const std::vector<LaidOutTensor>& inputs,
                                             v1::ReduceOp across, bool mean);
absl::StatusOr<LaidOutTensor> LowerLogSumExp(LoweringContext& ctx, const v1::Op& op,
                                             const std::vector<LaidOutTensor>& inputs);
// softmax and log_softmax
absl::StatusOr<LaidOutTensor> LowerSoftmax(LoweringContext& ctx, const v1::Op& op,
                                           const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerSoftmaxGrad(LoweringContext& ctx, const v1::Op& op,
                                               const std::vector<LaidOutTensor>& inputs);
// layer_norm and rms_norm
absl::StatusOr<LaidOutTensor> LowerNorm(LoweringContext& ctx, const v1::Op& op,
                                        const std::vector<LaidOutTensor>& inputs);
// layer_norm_grad and rms_norm_grad
absl::StatusOr<LaidOutTensor> LowerNormGrad(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerCrossEntropy(LoweringContext& ctx, const v1::Op& op,
                                                const std::vector<LaidOutTensor>& inputs);

}  // namespace math
}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OPS_MATH_H_
