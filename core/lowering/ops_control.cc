// The control op family: while_loop with a fixed trip count (conventions in ops_control.h).
#include "core/lowering/ops_control.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"
#include "core/ops/ops.h"
#include "core/reference/interpreter.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

absl::Status LoopError(const v1::Op& op, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("op '", op.name(), "' (while_loop): ", msg));
}

absl::StatusOr<TensorType> InferLoop(const v1::Op& op, const std::vector<TensorType>& inputs) {
  ASSIGN_OR_RETURN(LoopSpec spec, ParseLoop(op, inputs));
  return spec.body.type(spec.outputs[spec.output]);
}

// Adds `x` into `*acc` elementwise (same shape and dtype).
void Accumulate(const Tensor& x, Tensor* acc) {
  const int64_t n = acc->num_elements();
  if (acc->dtype() == DType::kFloat32) {
    for (int64_t i = 0; i < n; ++i) acc->f32()[i] += x.f32()[i];
  } else {
    for (int64_t i = 0; i < n; ++i) acc->i32()[i] += x.i32()[i];
  }
}

// Runs the body on the caller's runner (KernelContext::runner), the reference kernels by default.
absl::Status LoopReference(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                           Tensor* out, const KernelContext& context) {
  const KernelRunner& kernels =
      context.runner != nullptr ? *context.runner : ReferenceKernels();
  ASSIGN_OR_RETURN(LoopSpec spec, ParseLoop(op, {}));
  if (inputs.size() != spec.carried.size()) {
    return LoopError(op, absl::StrCat("has ", inputs.size(), " inputs for ", spec.carried.size(),
                                      " carried tensors"));
  }
  TensorMap state;
  for (size_t i = 0; i < inputs.size(); ++i) state[spec.carried[i]] = *inputs[i];
  const int k = static_cast<int>(spec.carried.size());
  const bool accumulator = spec.output >= k;
  Tensor acc(out->dtype(), out->shape());  // zeros
  for (int64_t it = 0; it < spec.trip_count; ++it) {
    ASSIGN_OR_RETURN(TensorMap values, Interpret(spec.body, state, spec.outputs, kernels));
    if (accumulator) Accumulate(values.at(spec.outputs[spec.output]), &acc);
    // Move each result into the next state (copy only a result carried twice before its last use).
    std::map<std::string, int> uses;
    for (int i = 0; i < k; ++i) ++uses[spec.outputs[i]];
    TensorMap next;
    for (int i = 0; i < k; ++i) {
      Tensor& value = values.at(spec.outputs[i]);
      next[spec.carried[i]] = --uses[spec.outputs[i]] == 0 ? std::move(value) : value;
    }
    state = std::move(next);
  }
  const Tensor& result = accumulator ? acc : state.at(spec.carried[spec.output]);
  *out = result.Reshaped(out->shape());
  return absl::OkStatus();
}

OpInfo WhileLoop() {
  OpInfo info;
  info.type = "while_loop";
  info.family = OpFamily::kControl;
  info.min_inputs = 0;
  info.max_inputs = -1;
  info.differentiable = false;
  info.summary =
      "runs attrs.trip_count iterations of its body graph; its output is a carried value's final "
      "value or an accumulator's sum over the iterations";
  info.collectives =
      "the body's collectives, once per iteration; accumulators made by an einsum reduce once "
      "after the loop";
  info.infer = &InferLoop;
  info.reference_in_context = &LoopReference;
  info.lower = &LowerLoop;
  return info;
}

const bool kRegistered = RegisterOps({WhileLoop()});

}  // namespace

absl::StatusOr<LoopSpec> ParseLoop(const v1::Op& op, const std::vector<TensorType>& inputs) {
  if (!op.has_body()) return LoopError(op, "needs a `body` graph");
  auto body = Graph::Build(op.body());
  if (!body.ok()) return LoopError(op, absl::StrCat("body: ", body.status().message()));
  LoopSpec spec;
  spec.body = *std::move(body);
  ASSIGN_OR_RETURN(spec.trip_count, IntAttr(op, "trip_count"));
  if (spec.trip_count < 0) return LoopError(op, "trip_count must be >= 0");
  auto carried = op.attrs().find("carried");
  if (carried != op.attrs().end()) {
    if (carried->second.value_case() != v1::AttrValue::kStrings) {
      return LoopError(op, "attribute 'carried' must be a string list");
    }
    spec.carried.assign(carried->second.strings().values().begin(),
                        carried->second.strings().values().end());
  }
  // Unconditional: a loop naming carried tensors without inputs would be lowered reading inputs
  // it does not have (found by fuzz/graph_fuzzer).
  if (static_cast<int>(spec.carried.size()) != op.inputs_size()) {
    return LoopError(op, absl::StrCat("has ", op.inputs_size(), " inputs but names ",
                                      spec.carried.size(), " carried tensors"));
  }
  std::vector<std::string> placeholders = spec.body.Placeholders();
  for (const std::string& p : placeholders) {
    if (std::find(spec.carried.begin(), spec.carried.end(), p) == spec.carried.end()) {
      return LoopError(op, absl::StrCat("body placeholder '", p,
                                        "' is not a carried tensor; list it in attrs.carried"));
    }
  }
  const int k = static_cast<int>(spec.carried.size());
  for (int i = 0; i < k; ++i) {
    const v1::Op* ph = spec.body.FindOp(spec.carried[i]);
    if (ph == nullptr || !IsFed(*ph)) {
      return LoopError(op, absl::StrCat("carried tensor '", spec.carried[i],
                                        "' is not a placeholder of the body"));
    }
    if (i < static_cast<int>(inputs.size())) {
      const TensorType& want = spec.body.type(spec.carried[i]);
      if (want.shape != inputs[i].shape || want.dtype != inputs[i].dtype) {
        return LoopError(op, absl::StrCat("input ", i, " is ", inputs[i].shape.ToString(),
                                          " but body placeholder '", spec.carried[i], "' is ",
                                          want.shape.ToString()));
      }
    }
  }
  spec.outputs.assign(op.body().outputs().begin(), op.body().outputs().end());
  if (static_cast<int>(spec.outputs.size()) < k) {
    return LoopError(op, absl::StrCat("the body lists ", spec.outputs.size(),
                                      " outputs; the first ", k,
                                      " must be the next values of the carried tensors"));
  }
  for (int i = 0; i < k; ++i) {
    const TensorType& next = spec.body.type(spec.outputs[i]);
    const TensorType& now = spec.body.type(spec.carried[i]);
    if (next.shape != now.shape || next.dtype != now.dtype) {
      return LoopError(op, absl::StrCat("body output '", spec.outputs[i], "' ",
                                        next.shape.ToString(), " must match carried '",
                                        spec.carried[i], "' ", now.shape.ToString()));
    }
  }
  spec.output = static_cast<int>(IntAttrOr(op, "output", 0));
  if (spec.output < 0 || spec.output >= static_cast<int>(spec.outputs.size())) {
    return LoopError(op, absl::StrCat("output ", spec.output, " is not one of the body's ",
                                      spec.outputs.size(), " outputs"));
  }
  return spec;
}

}  // namespace meshrt
