#include "core/ops/graph.h"

#include "core/ops/ops_state.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// Kahn's algorithm; on a cycle, an error naming the ops along one cycle.
absl::StatusOr<std::vector<int>> TopologicalOrder(const v1::Graph& g,
                                                  const std::map<std::string, int>& index) {
  const int n = g.ops_size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i) {
    for (const std::string& in : g.ops(i).inputs()) {
      int j = index.at(in);
      ++pending[i];
      users[j].push_back(i);
    }
  }
  // Always take the lowest-numbered ready op: a graph already listed in order keeps its order.
  std::set<int> ready;
  std::vector<int> order;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.insert(i);
  }
  while (!ready.empty()) {
    int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int u : users[i]) {
      if (--pending[u] == 0) ready.insert(u);
    }
  }
  if (static_cast<int>(order.size()) == n) return order;
  // Every op left has an input left; follow inputs until one repeats: that is a cycle.
  int start = 0;
  while (pending[start] == 0) ++start;
  std::vector<int> path;
  std::map<int, int> seen;
  int cur = start;
  while (!seen.count(cur)) {
    seen[cur] = static_cast<int>(path.size());
    path.push_back(cur);
    for (const std::string& in : g.ops(cur).inputs()) {
      int j = index.at(in);
      if (pending[j] > 0) {
        cur = j;
        break;
      }
    }
  }
  std::vector<std::string> cycle;
  for (size_t k = seen[cur]; k < path.size(); ++k) cycle.push_back(g.ops(path[k]).name());
  std::reverse(cycle.begin(), cycle.end());
  cycle.push_back(cycle.front());
  return absl::InvalidArgumentError(
      absl::StrCat("graph has a cycle: ", absl::StrJoin(cycle, " -> "),
                   "; a tensor cannot depend on itself"));
}

// The limits of the innermost Graph::Build(proto, limits) running on this thread. Shape inference
// of a while_loop (core/lowering/ops_control.cc) builds its body with Graph::Build(proto): the body's
// tensors are held to the same limits as the graph around it through this. The loop wraps a body's
// error in an InvalidArgument of its own; `violation` keeps the code of a limit's error so the
// outer call can restore it.
struct ActiveLimits {
  const RequestLimits* limits = nullptr;
  absl::StatusCode violation = absl::StatusCode::kOk;
};
thread_local ActiveLimits active;

}  // namespace

absl::StatusOr<Graph> Graph::Build(const v1::Graph& proto, const RequestLimits& limits) {
  RETURN_IF_ERROR(CheckGraphStructure(proto, limits));
  const ActiveLimits outer = active;
  active = ActiveLimits{&limits, absl::StatusCode::kOk};
  absl::StatusOr<Graph> g = Build(proto);
  const absl::StatusCode violation = active.violation;
  active = outer;
  if (!g.ok() && violation != absl::StatusCode::kOk) {
    return absl::Status(violation, g.status().message());
  }
  return g;
}

absl::StatusOr<Graph> Graph::Build(v1::Graph proto) {
  Graph g;
  g.proto_ = std::move(proto);
  const v1::Graph& p = g.proto_;
  for (int i = 0; i < p.ops_size(); ++i) {
    const v1::Op& op = p.ops(i);
    if (op.name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("op #", i, " (", op.type(), ") has no name; every op needs one"));
    }
    if (!g.index_.emplace(op.name(), i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("two ops are called '", op.name(), "'; op names must be unique"));
    }
  }
  for (const v1::Op& op : p.ops()) {
    if (meshrt::FindOp(op.type()) == nullptr) {
      RETURN_IF_ERROR(InferOutputType(op, {}).status());  // the unknown-type error
    }
    for (const std::string& in : op.inputs()) {
      if (!g.index_.count(in)) {
        return absl::InvalidArgumentError(absl::StrCat("op '", op.name(), "' (", op.type(),
                                                       ") reads '", in,
                                                       "', which no op in the graph makes"));
      }
    }
  }
  ASSIGN_OR_RETURN(g.order_, TopologicalOrder(p, g.index_));

  // Shape inference in order, and one size per dim name across the whole graph.
  std::map<std::string, std::pair<int64_t, std::string>> dim_sizes;  // name -> (size, tensor)
  for (int i : g.order_) {
    const v1::Op& op = p.ops(i);
    std::vector<TensorType> inputs;
    for (const std::string& in : op.inputs()) inputs.push_back(g.types_.at(in));
    ASSIGN_OR_RETURN(TensorType type, InferOutputType(op, inputs));
    if (active.limits != nullptr) {
      absl::Status s = CheckTensorElements(type.shape, op.name(), op.type(), *active.limits);
      if (!s.ok()) {
        if (active.violation == absl::StatusCode::kOk) active.violation = s.code();
        return s;
      }
    } else {
      RETURN_IF_ERROR(type.shape
                          .CheckedNumElements(absl::StrCat("tensor '", op.name(), "' (made by op '",
                                                           op.name(), "', ", op.type(), ")"))
                          .status());
    }
    for (const Dim& d : type.shape.dims()) {
      auto [it, inserted] = dim_sizes.emplace(d.name, std::make_pair(d.size, op.name()));
      if (!inserted && it->second.first != d.size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dim '", d.name, "' has size ", it->second.first, " in tensor '", it->second.second,
            "' but size ", d.size, " in tensor '", op.name(), "' (made by op '", op.name(), "', ",
            op.type(), "); a dim name must mean one size in the whole graph — rename one of them"));
      }
    }
    g.types_.emplace(op.name(), std::move(type));
  }
  for (const std::string& out : p.outputs()) {
    if (!g.types_.count(out)) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", out, "' names no tensor of the graph"));
    }
  }
  RETURN_IF_ERROR(CheckStateOps(p));
  return g;
}

const v1::Op* Graph::FindOp(absl::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &proto_.ops(it->second);
}

const TensorType& Graph::type(absl::string_view name) const {
  auto it = types_.find(std::string(name));
  MESHRT_CHECK(it != types_.end(), "no tensor ", name);
  return it->second;
}

absl::StatusOr<const TensorType*> Graph::FindType(absl::string_view name) const {
  auto it = types_.find(std::string(name));
  if (it == types_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("the graph has no tensor '", name, "'"));
  }
  return &it->second;
}

std::vector<std::string> Graph::Placeholders() const {
  std::vector<std::string> names;
  for (int i : order_) {
    if (IsFed(proto_.ops(i))) names.push_back(proto_.ops(i).name());
  }
  return names;
}

std::vector<std::string> Graph::Outputs() const {
  if (proto_.outputs_size() > 0) {
    return std::vector<std::string>(proto_.outputs().begin(), proto_.outputs().end());
  }
  std::set<std::string> consumed;
  for (const v1::Op& op : proto_.ops()) consumed.insert(op.inputs().begin(), op.inputs().end());
  std::vector<std::string> names;
  for (int i : order_) {
    if (!consumed.count(proto_.ops(i).name())) names.push_back(proto_.ops(i).name());
  }
  return names;
}

}  // namespace meshrt
