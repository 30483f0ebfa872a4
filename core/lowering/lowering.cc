#include "core/lowering/lowering.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ops/lower_ops.h"
#include "util/status_macros.h"

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
        return absl::Status(s.code(),
                            absl::StrCat("in the body of op '", op.name(), "': ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status LoweringBug(const v1::Op& op, absl::string_view what) {
  return absl::InternalError(
      absl::StrCat("lowering ", OpLabel(op), ": ", what, " (a lowering bug)"));
}

absl::StatusOr<LaidOutTensor> LowerByFamily(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs) {
  const OpInfo* info = FindOp(op.type());
  if (info == nullptr) return OpError(op, "unknown op type; `meshrt ops` lists the known ones");
  if (info->lower != nullptr) return info->lower(ctx, op, inputs);
  switch (info->family) {
    case OpFamily::kSource:
      return LowerSource(ctx, op);
    case OpFamily::kElementwise:
      return LowerElementwise(ctx, op, inputs);
    case OpFamily::kEinsum:
      return LowerEinsum(ctx, op, inputs);
    case OpFamily::kReshape:
      return LowerReshape(ctx, op, inputs[0]);
    default:
      break;
  }
  // Every op of the other families supplies its own lowering (OpInfo::lower).
  return LoweringBug(op, absl::StrCat("op type ", op.type(), " (family ", FamilyName(info->family),
                                      ") has no lowering"));
}

absl::StatusOr<LaidOutTensor> LowerOp(LoweringContext& ctx, const v1::Op& op,
                                      const std::vector<LaidOutTensor>& inputs) {
  const OpInfo* info = FindOp(op.type());
  if (info == nullptr) return OpError(op, "unknown op type; `meshrt ops` lists the known ones");
  const int n = static_cast<int>(inputs.size());
  if (n < info->min_inputs || (info->max_inputs >= 0 && n > info->max_inputs)) {
    const std::string want = info->max_inputs < 0 ? absl::StrCat("at least ", info->min_inputs)
                             : info->min_inputs == info->max_inputs
                                 ? absl::StrCat(info->min_inputs)
                                 : absl::StrCat(info->min_inputs, " to ", info->max_inputs);
    return OpError(op, absl::StrCat("is lowered with ", n, " inputs; it takes ", want));
  }
  const bool partial_input = std::any_of(inputs.begin(), inputs.end(), [](const LaidOutTensor& in) {
    return !in.partial_sum_axes.empty();
  });
  if (partial_input && ctx.lazy) {
    ASSIGN_OR_RETURN(std::optional<LaidOutTensor> kept, LowerOnPartials(ctx, op, inputs));
    if (kept.has_value()) return *std::move(kept);
  }
  std::vector<LaidOutTensor> resolved = inputs;
  // Every other op reads values: resolve its partial inputs to their rule layouts (once per
  // tensor: Reshard reuses a resolve already made, e.g. the one bound for fetching).
  for (LaidOutTensor& in : resolved) {
    if (in.partial_sum_axes.empty()) continue;
    ASSIGN_OR_RETURN(in, ctx.builder.Reshard(in, ctx.rules.LayoutFor(in.shape), op.name()));
  }
  ASSIGN_OR_RETURN(LaidOutTensor out, LowerByFamily(ctx, op, resolved));
  if (out.partial_sum_axes.empty()) return out;
  DropUnitPartialAxes(ctx, &out);
  if (ctx.lazy || (ctx.keep_partial != nullptr && ctx.keep_partial->count(op.name()))) return out;
  return ctx.builder.Reshard(out, ctx.RuleLayout(out.shape), op.name());
}

namespace {

absl::Status LowerInto(const Graph& graph, const LayoutRules& rules, ProgramBuilder& builder) {
  std::map<std::string, int> readers;
  for (int i : graph.topological_order()) {
    const v1::Op& op = graph.op(i);
    for (const std::string& in : std::set<std::string>(op.inputs().begin(), op.inputs().end())) {
      ++readers[in];
    }
  }
  std::set<int> read_partial;
  LoweringContext ctx{graph, rules, builder};
  ctx.lazy = true;
  ctx.readers = &readers;
  ctx.read_partial = &read_partial;
  std::map<std::string, LaidOutTensor> lowered;
  std::vector<std::pair<std::string, int>> partial_outputs;  // tensor, its partial buffer
  auto record = [&](const std::string& name, LaidOutTensor out) -> absl::Status {
    if (out.partial_sum_axes.empty()) {
      RETURN_IF_ERROR(builder.BindOutput(name, out));
    } else {
      // Consumers read the partial sum; the tensor itself stays fetchable through its resolve,
      // which consumers that need the value share.
      ASSIGN_OR_RETURN(LaidOutTensor value,
                       builder.Reshard(out, rules.LayoutFor(out.shape), name));
      RETURN_IF_ERROR(builder.BindOutput(name, value));
      partial_outputs.emplace_back(name, out.buffer);
    }
    lowered.emplace(name, std::move(out));
    return absl::OkStatus();
  };
  AccumulatorLowering accumulators = AccumulatorLowering::Find(graph, readers);
  for (int i : graph.topological_order()) {
    const v1::Op& op = graph.op(i);
    std::vector<std::pair<std::string, LaidOutTensor>> made;
    ASSIGN_OR_RETURN(AccumulatorLowering::Action action,
                     accumulators.Lower(ctx, op, lowered, &made));
    for (auto& [name, t] : made) RETURN_IF_ERROR(record(name, std::move(t)));
    if (action != AccumulatorLowering::Action::kGeneric) continue;
    std::vector<LaidOutTensor> inputs;
    for (const std::string& in : op.inputs()) {
      auto it = lowered.find(in);
      if (it == lowered.end()) {
        return OpError(
            op, absl::StrCat("reads tensor '", in, "', which no op before it in the graph makes"));
      }
      inputs.push_back(it->second);
    }
    ASSIGN_OR_RETURN(LaidOutTensor out, LowerOp(ctx, op, inputs));
    RETURN_IF_ERROR(record(op.name(), std::move(out)));
  }
  // A partial sum read unresolved had that op as its only reader: its resolve runs only when the
  // tensor is fetched.
  for (const auto& [name, buffer] : partial_outputs) {
    if (read_partial.count(buffer)) RETURN_IF_ERROR(builder.MarkResolvedOnFetch(name));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Program> Lower(const Graph& graph, const Mesh& mesh, const LayoutRules& rules) {
  RETURN_IF_ERROR(ValidateLayouts(graph, mesh, rules));
  ProgramBuilder builder(mesh, rules);
  RETURN_IF_ERROR(LowerInto(graph, rules, builder));
  return std::move(builder).Finish();
}

absl::StatusOr<v1::Program*> Lower(const Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                                   google::protobuf::Arena* arena) {
  RETURN_IF_ERROR(ValidateLayouts(graph, mesh, rules));
  ProgramBuilder builder(mesh, rules, arena);
  RETURN_IF_ERROR(LowerInto(graph, rules, builder));
  return std::move(builder).FinishOnArena();
}

}  // namespace meshrt
