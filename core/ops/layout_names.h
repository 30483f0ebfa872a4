// Layout rules that name dims the graph does not have.
//
// A rule whose tensor dim no tensor of the graph has splits nothing, so a typo (`batchh:rows`)
// would silently replicate everything the user meant to split. The entry points that take rules
// from a user (the coordinator's CreateSession, `meshrt explain / run / train`) refuse such rules
// before anything is lowered or dispatched, suggesting the closest dim the graph does have.
// (ValidateLayouts does not: programs may apply one rule set to several graphs on purpose.)
//
// Thread-safety: pure functions.
#ifndef MESHRT_CORE_OPS_LAYOUT_NAMES_H_
#define MESHRT_CORE_OPS_LAYOUT_NAMES_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "util/closest_name.h"  // ClosestName, used with GraphDimNames

namespace meshrt {

// Every dim name of every tensor of `graph`, loop bodies included.
std::set<std::string> GraphDimNames(const Graph& graph);

// InvalidArgument for the first rule (in name order) whose tensor dim no tensor of `graph` has:
// "layout rule 'batchh:rows' names dim 'batchh', which no tensor of the graph has; did you mean
// 'batch'?" (or, with nothing close, the graph's dims).
absl::Status CheckRulesNameGraphDims(const Graph& graph, const LayoutRules& rules);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_LAYOUT_NAMES_H_
