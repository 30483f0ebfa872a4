// while_loop lowering: the body lowered trip_count times in a row (see ops_control.h).
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/lowering/ops_control.h"
#include "core/ops/lower_ops.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// The lowered tensor `name` of loop `op`'s body; Internal if the body walk has not made it.
absl::StatusOr<LaidOutTensor> Lowered(const std::map<std::string, LaidOutTensor>& lowered,
                                      const std::string& name, const v1::Op& op) {
  auto it = lowered.find(name);
  if (it == lowered.end()) {
    return LoweringBug(op, absl::StrCat("body tensor '", name, "' is used before it is lowered"));
  }
  return it->second;
}

}  // namespace

absl::StatusOr<LaidOutTensor> LowerLoop(LoweringContext& ctx, const v1::Op& op,
                                        const std::vector<LaidOutTensor>& inputs) {
  ASSIGN_OR_RETURN(LoopSpec spec, ParseLoop(op, {}));  // validated by shape inference
  const int k = static_cast<int>(spec.carried.size());
  if (static_cast<int>(inputs.size()) != k) {
    return OpError(
        op, absl::StrCat("is lowered with ", inputs.size(), " inputs for ", k, " carried tensors"));
  }
  const bool accumulator = spec.output >= k;
  const std::string& result_name = spec.outputs[spec.output];
  const v1::Op* producer = spec.body.FindOp(result_name);
  // An accumulator made by an einsum stays a partial sum through the loop.
  std::set<std::string> keep_partial;
  const OpInfo* made_by = producer == nullptr ? nullptr : FindOp(producer->type());
  if (accumulator && made_by != nullptr && made_by->family == OpFamily::kEinsum) {
    keep_partial.insert(result_name);
  }
  LoweringContext body_ctx{spec.body, ctx.rules, ctx.builder, &keep_partial};

  std::vector<LaidOutTensor> state;
  for (int i = 0; i < k; ++i) {
    const Shape& shape = spec.body.type(spec.carried[i]).shape;
    ASSIGN_OR_RETURN(LaidOutTensor s,
                     ctx.builder.Reshard(inputs[i], ctx.RuleLayout(shape), op.name()));
    state.push_back(std::move(s));
  }
  LaidOutTensor acc;
  bool have_acc = false;
  for (int64_t it = 0; it < spec.trip_count; ++it) {
    std::map<std::string, LaidOutTensor> lowered;
    for (int i = 0; i < k; ++i) lowered[spec.carried[i]] = state[i];
    for (int idx : spec.body.topological_order()) {
      const v1::Op& body_op = spec.body.op(idx);
      if (IsFed(body_op)) continue;
      std::vector<LaidOutTensor> in;
      for (const std::string& name : body_op.inputs()) {
        ASSIGN_OR_RETURN(LaidOutTensor t, Lowered(lowered, name, op));
        in.push_back(std::move(t));
      }
      ASSIGN_OR_RETURN(lowered[body_op.name()], LowerOp(body_ctx, body_op, in));
    }
    for (int i = 0; i < k; ++i) {
      ASSIGN_OR_RETURN(state[i], Lowered(lowered, spec.outputs[i], op));
    }
    if (accumulator) {
      ASSIGN_OR_RETURN(const LaidOutTensor value, Lowered(lowered, result_name, op));
      if (have_acc) {
        ASSIGN_OR_RETURN(acc, ctx.builder.AddPartials(acc, value, op.name()));
      } else {
        acc = value;
      }
      have_acc = true;
    }
  }
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout layout = ctx.RuleLayout(type.shape);
  if (!accumulator) return ctx.builder.Reshard(state[spec.output], layout, op.name());
  if (!have_acc) {  // no iterations: zeros
    v1::Op zeros;
    zeros.set_name(op.name());
    zeros.set_type("zeros");
    *zeros.mutable_shape() = type.shape.ToProto();
    zeros.set_dtype(DTypeToProto(type.dtype));
    return ctx.builder.EmitLocal(zeros, {}, type.shape, type.dtype, layout);
  }
  return ctx.builder.Reshard(acc, layout, op.name());  // the one reduction after the loop
}

}  // namespace meshrt
