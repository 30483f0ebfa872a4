// The op registry: every op type the language knows, one record (OpInfo) per op holding its facets
// (arity, shape inference, reference kernel, lowering, cost, gradient; core/README.md "Adding an
// op" lists where each is filled; the workers' fast kernels are a table in kernels/).
//
// The built-in ops (this file's ops.cc):
//   placeholder   0 inputs   shape, dtype (DT_INVALID means float32)     fed at run time
//   constant      0 inputs   value                                        shape/dtype from value
//   einsum        >= 1       shape = output shape; every other input dim is summed; an output
//                            dim in no input is a broadcast
//   reshape       1          shape = new shape, same number of elements (row-major)
//   rename_dim    1          attrs {old: s, new: s}
// Every other family registers itself from its own file, with its conventions in its header:
// math (ops_math.h: elementwise, reductions, softmax, norms, cross-entropy), data movement and
// indexing (ops_data.h, ops_index.h), spatial (ops_spatial.h: shift, halo exchange, conv, pool),
// random and fills (ops_random.h). `meshrt ops` prints the whole registry.
// Thread-safe (the registry is immutable after static initialisation).
#ifndef MESHRT_CORE_OPS_OPS_H_
#define MESHRT_CORE_OPS_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"
#include "proto/graph.pb.h"

namespace meshrt {

enum class OpFamily {
  kSource,       // placeholder, constant, zeros, ones, range, random
  kEinsum,       // einsum
  kElementwise,  // unary, binary, where, cast, scalar ops
  kReduce,       // reductions and the composites built on them (softmax, norms, cross-entropy)
  kReshape,      // reshape, rename, replace_dims
  kData,         // slice, pad, concat, split, stack, unstack
  kIndex,        // one_hot, gather, top_k, argmax, cumsum, sort
  kSpatial,      // shift, halo_exchange, conv, pool
  kControl,      // while_loop
};

std::string FamilyName(OpFamily family);

struct TensorType;
struct LoweringContext;  // core/ops/lower_ops.h
struct LaidOutTensor;    // core/ir/program_builder.h
struct KernelContext;    // core/ops/kernel_runner.h
class Backward;          // core/ops/gradient.h
class Tensor;

// Per-op hooks. A null hook means the family's built-in code handles the op (ops.cc for shape
// inference, reference_kernels.cc for the reference kernel, lowering.cc's family default).
using InferFn = absl::StatusOr<TensorType> (*)(const v1::Op& op,
                                               const std::vector<TensorType>& inputs);
using KernelFn = absl::Status (*)(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                  Tensor* output);
// The kernel of an op that touches the host (reads a file): it gets the caller's KernelContext.
using ContextKernelFn = absl::Status (*)(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                         Tensor* output, const KernelContext& context);
// Lowers `op` (inputs in their rule layouts) and returns its output in its rule layout. Errors:
// InvalidArgument (via OpError) when the op's attrs or inputs cannot be lowered, Internal (naming
// the op) for a broken lowering invariant; never aborts. Code that compares or calls a LowerFn
// needs LaidOutTensor complete: include core/ir/program_builder.h.
using LowerFn = absl::StatusOr<LaidOutTensor> (*)(LoweringContext& ctx, const v1::Op& op,
                                                  const std::vector<LaidOutTensor>& inputs);

// The gradient rule of an op (core/ops/gradient.h): adds to g.b the ops computing the gradients of
// g.op's inputs from g.dy and hands them to g.Grad. Errors: Unimplemented for a form of the op it
// cannot differentiate, else the builder's or the op's attribute errors.
using GradientFn = absl::Status (*)(Backward& g);

// The work of one local slice of an op: what the cost model (core/planning/cost_model.h) and `meshrt
// explain` count. Bytes are of the slices the kernel reads and writes, not of whole tensors.
struct SliceCost {
  double flops = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
};
// Cost of one slice of `op`, given the input and output slice types (attrs as lowered). Pure.
using CostFn = SliceCost (*)(const v1::Op& op, const std::vector<TensorType>& inputs,
                             const TensorType& output);

// Lazy partial sums (core/lowering/lower_partial.cc): whether `op` is linear in the inputs marked in
// `partial` (at least one is, one entry per input), so that a partial sum may flow through it and
// be resolved once after it. `in_dtypes`: the inputs' dtypes; `out_dtype`: the output's. Pure.
using LinearFn = bool (*)(const v1::Op& op, const std::vector<bool>& partial,
                          const std::vector<DType>& in_dtypes, DType out_dtype);
// The LinearFn of an op that is linear in its one input (a reshape, a sum, a negation).
bool LinearInItsInput(const v1::Op& op, const std::vector<bool>& partial,
                      const std::vector<DType>& in_dtypes, DType out_dtype);

// The fast kernel of an op (a facet the CPU kernels, //kernels, run instead of `reference`): it sees
// float32 inputs and output only and returns nullopt to send the op to the reference kernel (an
// arity, attribute or form it does not take: the reference kernel owns those errors), else its
// status (unlabelled; the runner names the op). Most fast kernels are kernels/fast_kernels.cc's
// table; an op may carry its own (a vectorisable loop in its file: ops_math.h FastUnary).
using FastKernelFn = std::optional<absl::Status> (*)(const v1::Op& op,
                                                     absl::Span<const Tensor* const> inputs,
                                                     Tensor* output);

// The dtype rule of an op's inputs, checked by InferOutputType before `infer` (the output's dtype
// is `infer`'s). A dtype added to the language joins these sets here, once.
enum class InputDTypes {
  kAny,       // any dtype (or a mix the op's infer checks: an index input, a condition)
  kFloating,  // every input floating point (IsFloating: float32)
};
// Whether `dtype` is floating point (float32).
bool IsFloating(DType dtype);

// What a source op is to the interpreter, the lowering and the runtime (OpInfo::source).
enum class SourceKind {
  kNone,      // computed (from inputs, attrs, a fill or a random draw)
  kFed,       // placeholder: a value fed at run time
  kVariable,  // variable: state kept on the workers between steps
};

struct OpInfo {
  std::string type;
  OpFamily family;
  int min_inputs;
  int max_inputs;  // -1: any number
  bool differentiable;
  std::string summary;
  // What its lowering may emit, for `meshrt ops` (e.g. "allreduce(sum) over split reduced dims").
  std::string collectives;
  // The kernel needs the slice's place in the whole tensor: the executor passes attrs
  // `_slice_begin` and `_global_sizes` (one entry per output dim).
  bool needs_slice_begin = false;
  InferFn infer = nullptr;
  KernelFn reference = nullptr;
  LowerFn lower = nullptr;
  // Instead of `reference`, for ops that read files: every runner passes its context through.
  // (Last, so that the families' positional initializers stay valid.)
  ContextKernelFn reference_in_context = nullptr;
  // Its cost per slice; null: the family default (core/ops/op_cost.h lists the defaults and the
  // per-element constants of the overrides).
  CostFn cost = nullptr;
  // The gradient facet, attached by RegisterGradients (rules: core/ops/gradients_<family>.cc).
  // `differentiable` says the op has a `gradient`; a `zero_gradient` op is piecewise constant in
  // its inputs (comparisons, sign, argmax, ...): it passes back nothing and is not differentiable.
  // An op with neither stops autodiff (Unimplemented) when it lies on a path to the loss.
  GradientFn gradient = nullptr;
  bool zero_gradient = false;
  // Which inputs it is linear in, for lazy partial sums (LinearFn); null: none (a partial input is
  // resolved before the op runs). Its lowering (hook or family default) then runs on partial
  // inputs too, with their partial axes left out of the rule layouts (LoweringContext).
  LinearFn linear = nullptr;
  // Writes the variable that is its input 0 after the step (assign, assign_add): the interpreter
  // and the lowering keep such ops, loop bodies may not hold them (IsVariableUpdate).
  bool updates_variable = false;
  // Its dtype rule (InputDTypes).
  InputDTypes input_dtypes = InputDTypes::kAny;
  // Its fast kernel (FastKernelFn); null: kernels/fast_kernels.cc's table, else the reference.
  FastKernelFn fast = nullptr;
  // Fed, a variable, or neither (SourceKind).
  SourceKind source = SourceKind::kNone;
};

// Adds ops to the registry; call from a static initializer in the family's file:
//   const bool kRegistered = RegisterOps({...});
// CHECK-fails on a duplicate type. Returns true.
bool RegisterOps(std::vector<OpInfo> ops);

// Attaches gradient facets to ops' records; call from a static initializer in a
// core/ops/gradients_<family>.cc file:
//   const bool kRegistered = RegisterGradients({{"add", &AddGradient}, ...});
// Any order against RegisterOps works (a facet waits for its op). CHECK-fails when a type gets a
// second facet. A type that never gets registered is reported by CheckGradientFacets. Returns true.
struct GradientRule {
  std::string type;
  GradientFn gradient;
};
bool RegisterGradients(std::vector<GradientRule> rules);
// Attaches reference kernels to the built-in ops' records (ops.cc: einsum, reshape, rename_dim,
// constant), whose kernels live with the kernel runner (core/ops/reference_kernels.cc, a target
// above the registry). CHECK-fails for a type not yet registered or a second kernel. Returns true.
struct ReferenceKernelRule {
  std::string type;
  KernelFn reference;
};
bool RegisterReferenceKernels(std::vector<ReferenceKernelRule> rules);
// Marks `types` zero_gradient (same contract as RegisterGradients).
bool RegisterZeroGradients(std::vector<std::string> types);
// After static initialisation: Internal naming every gradient facet registered for an unknown op
// type, and every op whose `differentiable` disagrees with having a `gradient`; else OK.
absl::Status CheckGradientFacets();

// Every registered op, sorted by type. (Complete once static initialisation is over.)
std::vector<OpInfo> AllOps();
// The registered op called `type`, or nullptr.
const OpInfo* FindOp(absl::string_view type);
// Whether `op` is fed at run time (a placeholder), or a variable: its record's `source` (false for
// an unknown type).
bool IsFed(const v1::Op& op);
bool IsVariable(const v1::Op& op);

struct TensorType {
  Shape shape;
  DType dtype = DType::kFloat32;
};

// Output type of `op` given its inputs' types (in input order). Errors are InvalidArgument and name
// the op, its type, and what is wrong (unknown type, wrong input count, unknown dim, mismatched
// dtypes or element counts, a bad attribute).
absl::StatusOr<TensorType> InferOutputType(const v1::Op& op, const std::vector<TensorType>& inputs);

// "op 'NAME' (TYPE)": how errors name an op.
std::string OpLabel(const v1::Op& op);
// InvalidArgument "op 'NAME' (TYPE): msg" — the error of every op family's checks.
absl::Status OpError(const v1::Op& op, absl::string_view msg);

// Attribute access with errors naming the op.
absl::StatusOr<float> FloatAttr(const v1::Op& op, absl::string_view name);
absl::StatusOr<std::string> StringAttr(const v1::Op& op, absl::string_view name);
absl::StatusOr<int64_t> IntAttr(const v1::Op& op, absl::string_view name);
absl::StatusOr<std::vector<int64_t>> IntListAttr(const v1::Op& op, absl::string_view name);
// The attribute if present, else `fallback`.
float FloatAttrOr(const v1::Op& op, absl::string_view name, float fallback);
int64_t IntAttrOr(const v1::Op& op, absl::string_view name, int64_t fallback);
bool BoolAttrOr(const v1::Op& op, absl::string_view name, bool fallback);
std::string StringAttrOr(const v1::Op& op, absl::string_view name, const std::string& fallback);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OPS_H_
