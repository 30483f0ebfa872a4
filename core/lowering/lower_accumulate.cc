// Microbatch accumulators reduced once per K (core/train/optimizers.h, TrainOptions.microbatches). The
// optimizer accumulates each step's gradient g into a variable acc:
//   sum  = add(acc, g)               the cycle's gradients so far
//   next = where(accumulating, sum, 0); assign(acc, next)
//   ... div(sum, K) ... where(apply, new, old) for every weight and slot
// In data parallelism g is a partial sum over the batch's mesh axes. Resolving it every step
// allreduces every microbatch; instead acc is kept as a partial sum over g's axes (proto
// ProgramVariable.partial_sum_axes): sum is a local add of two partial sums, next is lowered on the
// unresolved buffers (where is linear in them) and assigned back unresolved, and sum is resolved
// once, by a resolve guarded by the apply predicate (proto Instruction.predicate) — it runs on
// the step of the cycle that applies the update; on the others it yields zeros.
//
// That is sound when every value computed from the guarded resolve is discarded on the steps it
// is skipped. The lowering checks it on the graph, for the accumulators of one predicate p
// together: starting from their sums, a tensor is "tainted" when an input is, except that
// where(p, x, y) is tainted only through y (x is taken only where p is nonzero, when the resolve
// ran) and `next` reads the partial sum, not the resolve. No variable update may take a tainted
// value, and tainted values flow only through pure math (elementwise, einsum, reductions,
// reshapes, slicing) — no loop, no index op, nothing stateful. Fetched tensors are the executor's
// part: a step that fetches anything depending on the resolve runs it (runtime/executor.h), so
// every fetched value, e.g. the global norm on an accumulating step, stays exact.
//
// Anything else — g not a partial sum (model-parallel weights: nothing to save), a layout that
// splits acc over g's partial axes, a predicate or condition not yet lowered or not a replicated
// scalar, a failed taint check — lowers acc as an ordinary variable, as before.
#include <algorithm>
#include <map>
#include <set>

#include "core/ops/lower_ops.h"
#include "core/ops/ops_math.h"
#include "core/ops/ops_state.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

bool IsPartial(const LaidOutTensor& t) { return !t.partial_sum_axes.empty(); }

bool UsesAny(const TensorLayout& layout, const std::vector<int>& axes) {
  for (int a : layout.mesh_axis) {
    if (std::find(axes.begin(), axes.end(), a) != axes.end()) return true;
  }
  return false;
}

// Families whose ops compute their output from their inputs' values alone, without state,
// control flow or index lookups: what a tainted value may flow through.
bool PureMath(const v1::Op& op) {
  const OpInfo* info = FindOp(op.type());
  if (info == nullptr || op.has_body()) return false;
  switch (info->family) {
    case OpFamily::kElementwise:
    case OpFamily::kEinsum:
    case OpFamily::kReduce:
    case OpFamily::kReshape:
    case OpFamily::kData:
      return true;
    default:
      return false;
  }
}

// The accumulators in `candidates` (all guarded by `predicate`) pass the taint check above.
bool DiscardedWhenSkipped(const Graph& graph, const std::string& predicate,
                          const std::vector<AccumulatorLowering::Accumulator>& candidates) {
  std::set<std::string> tainted, reads_partial;
  for (const auto& a : candidates) {
    tainted.insert(a.sum);
    reads_partial.insert(a.next);
  }
  for (int i : graph.topological_order()) {
    const v1::Op& op = graph.op(i);
    if (reads_partial.count(op.name())) continue;
    std::vector<bool> in(op.inputs_size());
    bool any = false;
    for (int k = 0; k < op.inputs_size(); ++k) {
      in[k] = tainted.count(op.inputs(k)) > 0;
      any = any || in[k];
    }
    if (!any) continue;
    if (op.type() == "where" && op.inputs(0) == predicate && !in[0]) {
      // where(p, x, y): x only where p is nonzero; a scalar y is never tainted.
      if (op.inputs_size() == 3 && in[2]) tainted.insert(op.name());
      continue;
    }
    if (IsVariableUpdate(op.type()) || !PureMath(op)) return false;
    tainted.insert(op.name());
  }
  return true;
}

}  // namespace

AccumulatorLowering AccumulatorLowering::Find(const Graph& graph,
                                              const std::map<std::string, int>& readers) {
  std::map<std::string, std::vector<const v1::Op*>> read_by;
  for (int i : graph.topological_order()) {
    const v1::Op& op = graph.op(i);
    for (const std::string& in : std::set<std::string>(op.inputs().begin(), op.inputs().end())) {
      read_by[in].push_back(&op);
    }
  }
  auto count = [&](const std::string& t) {
    auto it = readers.find(t);
    return it == readers.end() ? 0 : it->second;
  };
  std::map<std::string, std::vector<Accumulator>> by_predicate;
  for (int i : graph.topological_order()) {
    const v1::Op& var = graph.op(i);
    if (!IsVariable(var)) continue;
    const std::string predicate = StringAttrOr(var, kAccumulatorApplyAttr, "");
    if (predicate.empty() || StringAttrOr(var, "initializer", "zeros") != "zeros") continue;
    if (graph.type(var.name()).dtype != DType::kFloat32 || !graph.HasTensor(predicate)) continue;
    const TensorType& p = graph.type(predicate);
    if (p.dtype != DType::kFloat32 || p.shape.rank() != 0 || count(var.name()) != 2) continue;
    Accumulator a;
    a.variable = var.name();
    a.predicate = predicate;
    for (const v1::Op* r : read_by[var.name()]) {
      if (r->type() == "add" && r->inputs_size() == 2 && !math::HasScalar(*r) &&
          r->inputs(0) != r->inputs(1)) {
        a.sum = r->name();
        a.gradient = r->inputs(r->inputs(0) == var.name() ? 1 : 0);
      } else if (r->type() == "assign" && r->inputs(0) == var.name()) {
        a.update = r->name();
        a.next = r->inputs(1);
      }
    }
    if (a.sum.empty() || a.update.empty() || count(a.next) != 1) continue;
    const v1::Op* next = graph.FindOp(a.next);
    if (next == nullptr || next->type() != "where" || next->inputs_size() != 2 ||
        next->inputs(1) != a.sum || next->inputs(0) == a.sum ||
        BoolAttrOr(*next, "scalar_first", false) || !math::HasScalar(*next)) {
      continue;
    }
    absl::StatusOr<double> zero = math::ScalarAttr(*next);
    if (!zero.ok() || *zero != 0.0) continue;
    a.condition = next->inputs(0);
    by_predicate[predicate].push_back(std::move(a));
  }
  AccumulatorLowering out;
  for (auto& [predicate, group] : by_predicate) {
    if (!DiscardedWhenSkipped(graph, predicate, group)) continue;
    for (Accumulator& a : group) {
      const int k = static_cast<int>(out.accumulators_.size());
      for (const std::string* name : {&a.variable, &a.sum, &a.next, &a.update}) {
        out.role_[*name] = k;
      }
      out.accumulators_.push_back(std::move(a));
    }
  }
  return out;
}

absl::StatusOr<AccumulatorLowering::Action> AccumulatorLowering::Lower(
    LoweringContext& ctx, const v1::Op& op, const std::map<std::string, LaidOutTensor>& lowered,
    std::vector<std::pair<std::string, LaidOutTensor>>* made) {
  auto role = role_.find(op.name());
  if (role == role_.end()) return Action::kGeneric;
  Accumulator& a = accumulators_[role->second];
  auto find = [&](const std::string& name) -> const LaidOutTensor* {
    auto it = lowered.find(name);
    return it == lowered.end() ? nullptr : &it->second;
  };
  if (op.name() == a.variable) return Action::kDeferred;  // lowered with its sum

  if (op.name() == a.sum) {
    const v1::Op* var_op = ctx.graph.FindOp(a.variable);
    const LaidOutTensor* g = find(a.gradient);
    const LaidOutTensor* predicate = find(a.predicate);
    const LaidOutTensor* condition = find(a.condition);
    if (var_op == nullptr || g == nullptr) return LoweringBug(op, "its inputs are not lowered");
    const TensorType& type = ctx.graph.type(a.variable);
    const std::vector<int>& axes = g->partial_sum_axes;
    a.partial = IsPartial(*g) && g->layout == ctx.rules.LayoutFor(type.shape) &&
                predicate != nullptr && !IsPartial(*predicate) && predicate->shape.rank() == 0 &&
                condition != nullptr && !IsPartial(*condition) &&
                !UsesAny(condition->layout, axes) && ctx.read_partial != nullptr;
    if (!a.partial) {
      ASSIGN_OR_RETURN(LaidOutTensor acc, LowerOp(ctx, *var_op, {}));
      made->emplace_back(a.variable, std::move(acc));
      return Action::kGeneric;
    }
    ASSIGN_OR_RETURN(LaidOutTensor acc, ctx.builder.AddVariable(*var_op, type.shape, type.dtype,
                                                                g->layout, axes));
    ctx.read_partial->insert(acc.buffer);  // fetching acc resolves it; no instruction does
    const bool acc_first = op.inputs(0) == a.variable;
    ASSIGN_OR_RETURN(LaidOutTensor sum, acc_first
                                            ? ctx.builder.AddPartials(acc, *g, op.name())
                                            : ctx.builder.AddPartials(*g, acc, op.name()));
    // The one resolve of the cycle, shared by every consumer of sum's value (Reshard reuses it).
    const int first = ctx.builder.num_instructions();
    RETURN_IF_ERROR(
        ctx.builder.Reshard(sum, ctx.rules.LayoutFor(sum.shape), op.name()).status());
    RETURN_IF_ERROR(ctx.builder.Guard(first, *predicate, op.name()));
    made->emplace_back(a.variable, std::move(acc));
    made->emplace_back(a.sum, std::move(sum));
    return Action::kLowered;
  }
  if (!a.partial) return Action::kGeneric;

  if (op.name() == a.next) {
    const LaidOutTensor* condition = find(a.condition);
    const LaidOutTensor* sum = find(a.sum);
    const LaidOutTensor* acc = find(a.variable);
    if (condition == nullptr || sum == nullptr || acc == nullptr) {
      return LoweringBug(op, "its inputs are not lowered");
    }
    // As LowerOnPartials does, on the slab of processors with one coordinate along the axes.
    LoweringContext slab = ctx;
    slab.partial_axes = sum->partial_sum_axes;
    LaidOutTensor buffer = *sum;
    buffer.partial_sum_axes.clear();
    ASSIGN_OR_RETURN(LaidOutTensor out, LowerByFamily(slab, op, {*condition, buffer}));
    out.partial_sum_axes = sum->partial_sum_axes;
    if (out.layout != acc->layout) {
      return LoweringBug(op, "the accumulator's next value is not laid out as the accumulator");
    }
    ctx.read_partial->insert(out.buffer);  // its update reads it unresolved
    made->emplace_back(a.next, std::move(out));
    return Action::kLowered;
  }
  // a.update: the accumulator takes its next value unresolved.
  const LaidOutTensor* next = find(a.next);
  if (next == nullptr) return LoweringBug(op, "its value is not lowered");
  RETURN_IF_ERROR(ctx.builder.SetVariableUpdate(a.variable, *next));
  made->emplace_back(a.update, *next);
  return Action::kLowered;
}

}  // namespace meshrt
