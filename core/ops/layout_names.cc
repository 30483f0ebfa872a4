#include "core/ops/layout_names.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of a substring).
int EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::set<std::string> GraphDimNames(const Graph& graph) {
  std::set<std::string> names;
  AddDimNames(graph, &names);
  return names;
}

std::string ClosestName(absl::string_view name, const std::set<std::string>& names) {
  const std::string lower = absl::AsciiStrToLower(name);
  const int limit = std::max<int>(2, static_cast<int>(name.size()) / 3);
  std::string best;
  int best_distance = limit + 1;
  for (const std::string& candidate : names) {  // ties: the first in name order
    const int distance = EditDistance(lower, absl::AsciiStrToLower(candidate));
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
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
