#include "core/ops/layout_names.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/closest_name.h"

namespace meshrt {
namespace {

void AddDimNames(const Graph& graph, std::set<std::string>* names) {
  for (int i : graph.topological_order()) {
    const v1::Op& op = graph.op(i);
    for (const Dim& d : graph.type(op.name()).shape.dims()) names->insert(d.name);
    if (op.has_body()) {
      absl::StatusOr<Graph> body = Graph::Build(op.body());
      if (body.ok()) AddDimNames(*body, names);  // a bad body is reported by the lowering
    }
  }
}

}  // namespace

std::set<std::string> GraphDimNames(const Graph& graph) {
  std::set<std::string> names;
  AddDimNames(graph, &names);
  return names;
}

absl::Status CheckRulesNameGraphDims(const Graph& graph, const LayoutRules& rules) {
  const std::set<std::string> names = GraphDimNames(graph);
  for (const auto& [dim, mesh_dim] : rules.rules()) {
    if (names.count(dim)) continue;
    std::string message = absl::StrCat("layout rule '", dim, ":", mesh_dim, "' names dim '", dim,
                                       "', which no tensor of the graph has");
    const std::string closest = ClosestName(dim, names);
    if (!closest.empty()) {
      absl::StrAppend(&message, "; did you mean '", closest, "'?");
    } else if (names.empty()) {
      absl::StrAppend(&message, " (its tensors are all scalars: there is nothing to split)");
    } else {
      std::vector<std::string> some(names.begin(), names.end());
      const size_t shown = std::min<size_t>(some.size(), 12);
      absl::StrAppend(&message, " (its dims: ",
                      absl::StrJoin(some.begin(), some.begin() + shown, ", "),
                      shown < some.size() ? ", ..." : "", ")");
    }
    return absl::InvalidArgumentError(message);
  }
  return absl::OkStatus();
}

}  // namespace meshrt
