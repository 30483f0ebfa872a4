#include "core/reference/interpreter.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ops/ops_state.h"
#include "util/status_macros.h"

namespace meshrt {

absl::Status CheckFeeds(const Graph& graph, const TensorMap& feeds) {
  for (const auto& [name, value] : feeds) {
    const v1::Op* op = graph.FindOp(name);
    if (op == nullptr || !IsFed(*op)) {
      std::string known;
      for (const std::string& p : graph.Placeholders()) absl::StrAppend(&known, " ", p);
      return absl::InvalidArgumentError(absl::StrCat("feed '", name,
                                                     "' names no placeholder; placeholders:",
                                                     known.empty() ? " (none)" : known));
    }
    const TensorType& want = graph.type(name);
    if (value.dtype() != want.dtype || value.shape() != want.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feed '", name, "' is ", DTypeName(value.dtype()), value.shape().ToString(),
          " but placeholder '", name, "' is ", DTypeName(want.dtype), want.shape.ToString()));
    }
  }
  for (const std::string& p : graph.Placeholders()) {
    if (!feeds.count(p)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placeholder '", p, "' (", graph.type(p).shape.ToString(), ") is not fed"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> Interpret(const Graph& graph, const TensorMap& feeds,
                                    const std::vector<std::string>& fetches,
                                    const KernelRunner& kernels) {
  TensorMap variables;
  return InterpretStep(graph, feeds, fetches, &variables, kernels);
}

absl::StatusOr<TensorMap> InterpretStep(const Graph& graph, const TensorMap& feeds,
                                        const std::vector<std::string>& fetches,
                                        TensorMap* variables, const KernelRunner& kernels) {
  RETURN_IF_ERROR(CheckFeeds(graph, feeds));
  for (const std::string& f : fetches) {
    if (!graph.HasTensor(f)) {
      return absl::InvalidArgumentError(absl::StrCat("fetch '", f, "' names no tensor"));
    }
  }
  // With fetches, only what they, the variables and the variables' updates depend on runs (as
  // runtime/executor.h prunes a step): e.g. an eval pass nobody fetches costs nothing.
  std::set<std::string> needed;
  if (!fetches.empty()) {
    std::vector<std::string> stack = fetches;
    for (const v1::Op& op : graph.proto().ops()) {
      if (IsVariable(op) || IsVariableUpdate(op.type())) stack.push_back(op.name());
    }
    while (!stack.empty()) {
      const std::string name = std::move(stack.back());
      stack.pop_back();
      if (!needed.insert(name).second) continue;
      for (const std::string& in : graph.FindOp(name)->inputs()) stack.push_back(in);
    }
  }
  // Fed and held tensors are read in place; only computed ones are stored (`computed`, whose map
  // nodes never move). `values` sees them all.
  TensorMap computed;
  std::map<std::string, const Tensor*> values;
  for (int i : graph.topological_order()) {
    const v1::Op& op = graph.op(i);
    if (!fetches.empty() && !needed.count(op.name())) continue;
    if (IsFed(op)) {
      values[op.name()] = &feeds.at(op.name());
      continue;
    }
    if (IsVariable(op) && variables->count(op.name())) {
      const Tensor& v = variables->at(op.name());
      const TensorType& want = graph.type(op.name());
      if (v.shape() != want.shape || v.dtype() != want.dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable '", op.name(), "' holds ", DTypeName(v.dtype()), v.shape().ToString(),
            " but the graph declares it ", DTypeName(want.dtype), want.shape.ToString()));
      }
      values[op.name()] = &v;
      continue;
    }
    std::vector<const Tensor*> inputs;
    for (const std::string& in : op.inputs()) inputs.push_back(values.at(in));
    const TensorType& type = graph.type(op.name());
    Tensor out(type.dtype, type.shape);
    KernelContext context;
    context.runner = &kernels;
    absl::Status s = kernels.Run(op, inputs, &out, context);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("interpreting op '", op.name(), "' (", op.type(),
                                                 "): ", s.message()));
    }
    Tensor& stored = computed[op.name()];
    stored = std::move(out);
    values[op.name()] = &stored;
  }
  // The fetched values of the step's start, before the updates below replace held variables.
  TensorMap result;
  if (fetches.empty()) {
    for (const auto& [name, t] : values) result[name] = *t;
  } else {
    for (const std::string& f : fetches) result[f] = *values.at(f);
  }
  // Updates take effect together, after every op has read the values of the step's start.
  for (const v1::Op& op : graph.proto().ops()) {
    if (IsVariable(op) && !variables->count(op.name())) {
      (*variables)[op.name()] = *values.at(op.name());
    }
  }
  for (const v1::Op& op : graph.proto().ops()) {
    if (IsVariableUpdate(op.type())) (*variables)[op.inputs(0)] = std::move(computed.at(op.name()));
  }
  return result;
}

}  // namespace meshrt
