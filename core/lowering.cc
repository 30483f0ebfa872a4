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
    if (op.has_body()) {  // a loop body is laid out by the same rules
      ASSIGN_OR_RETURN(Graph body, Graph::Build(op.body()));
      absl::Status s = ValidateLayouts(body, mesh, rules);
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("in the body of op '", op.name(), "': ",
                                                   s.message()));
      }
    }
  }
  return absl::OkStatus();
}

LaidOutTensor LowerOp(LoweringContext& ctx, const v1::Op& op,
                      const std::vector<LaidOutTensor>& inputs) {
  const OpInfo* info = FindOp(op.type());
  if (info->lower != nullptr) return info->lower(ctx, op, inputs);
  switch (info->family) {
    case OpFamily::kSource:
      return LowerSource(ctx, op);
    case OpFamily::kElementwise:
      return LowerElementwise(ctx, op, inputs);
    case OpFamily::kEinsum:
      return LowerEinsum(ctx, op, inputs);
    case OpFamily::kReduce:
      return LowerReduce(ctx, op, inputs[0]);
    case OpFamily::kReshape:
      return LowerReshape(ctx, op, inputs[0]);
    default:
      // Every op of the other families supplies its own lowering (OpInfo::lower).
      MESHRT_CHECK(false, "op type ", op.type(), " has no lowering");
  }
  return LaidOutTensor();
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
    LaidOutTensor out = LowerOp(ctx, op, inputs);
    builder.BindOutput(op.name(), out);
    lowered.emplace(op.name(), std::move(out));
  }
  return std::move(builder).Finish();
}

}  // namespace meshrt
