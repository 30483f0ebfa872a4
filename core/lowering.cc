#include "core/lowering.h"

#include <map>

#include "core/lower_ops.h"
#include "core/logging.h"
#include "core/status_macros.h"

namespace meshrt {

absl::Status ValidateLayouts(const Graph& graph, const Mesh& mesh, const LayoutRules& rules) {
  for (int i : graph.topological_order()) {
    const v1::Op& op = graph.op(i);
    const Shape& shape = graph.type(op.name()).shape;
    RETURN_IF_ERROR(
        CheckLayout(shape, rules.LayoutFor(shape), mesh, op.name(), op.name(), op.type()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Program> Lower(const Graph& graph, const Mesh& mesh, const LayoutRules& rules) {
  RETURN_IF_ERROR(ValidateLayouts(graph, mesh, rules));
  ProgramBuilder builder(mesh, rules);
  LoweringContext ctx{graph, rules, builder};
  std::map<std::string, LaidOutTensor> lowered;
  for (int i : graph.topological_order()) {
    const v1::Op& op = graph.op(i);
    std::vector<LaidOutTensor> inputs;
    for (const std::string& in : op.inputs()) inputs.push_back(lowered.at(in));
    const OpInfo* info = FindOp(op.type());
    LaidOutTensor out;
    if (info->lower != nullptr) {
      out = info->lower(ctx, op, inputs);
      builder.BindOutput(op.name(), out);
      lowered.emplace(op.name(), std::move(out));
      continue;
    }
    switch (info->family) {
      case OpFamily::kSource:
        out = LowerSource(ctx, op);
        break;
      case OpFamily::kElementwise:
        out = LowerElementwise(ctx, op, inputs);
        break;
      case OpFamily::kEinsum:
        out = LowerEinsum(ctx, op, inputs);
        break;
      case OpFamily::kReduce:
        out = LowerReduce(ctx, op, inputs[0]);
        break;
      case OpFamily::kReshape:
        out = LowerReshape(ctx, op, inputs[0]);
        break;
      default:
        // Every op of the other families supplies its own lowering (OpInfo::lower).
        MESHRT_CHECK(false, "op type ", op.type(), " has no lowering");
    }
    builder.BindOutput(op.name(), out);
    lowered.emplace(op.name(), std::move(out));
  }
  return std::move(builder).Finish();
}

}  // namespace meshrt
