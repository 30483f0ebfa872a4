// The planner (issue 15, `--layout auto` and `--mesh auto:N`): chooses the mesh shape and the
// layout rules of a graph that minimise the predicted step time within a per-worker memory limit.
//
// A candidate (mesh, rules) is evaluated by lowering the graph (core/lowering/lowering.h), predicting its
// step time under a hardware profile (core/planning/cost_model.h CostProgram: compute + communication, the
// step overhead plus the critical path of the executor's two threads) and computing its peak memory
// per worker (core/planning/memory_model.h); a candidate whose layout is invalid or whose peak is over the
// limit is refused. The candidates are explored by core/planning/layout_search.h's bounded, deterministic
// beam search. Mesh dims of equal size are interchangeable in the model (same-host groups of the
// same size cost the same), so rules that differ only by a permutation of such dims are evaluated
// once (SearchOptions::mesh_symmetry) — unless the profile's processor_hosts put the workers on
// several hosts: groups that span hosts use the profile's cross-host links, and every permutation
// is evaluated.
//
// Thread-safety: pure functions of their arguments (the profile and graph are read only).
#ifndef MESHRT_CORE_PLANNING_PLANNER_H_
#define MESHRT_CORE_PLANNING_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "core/planning/cost_model.h"
#include "core/planning/layout_search.h"

namespace meshrt {

// The planner's search options: layout_search's defaults, with threads = 0 (one per hardware
// thread).
inline SearchOptions DefaultPlanSearch() {
  SearchOptions s;
  s.threads = 0;
  return s;
}

struct PlanOptions {
  HardwareProfile profile;
  // Per-worker bytes a candidate's peak may reach; 0: no limit.
  int64_t memory_limit_bytes = 0;
  // The step's fetches (as CostProgram / ComputeMemory take them); empty: the graph's outputs.
  std::vector<std::string> fetches;
  // search.threads <= 0: one per hardware thread (candidates are lowered in parallel).
  SearchOptions search = DefaultPlanSearch();
};

struct PlannedCandidate {
  Mesh mesh;
  LayoutRules rules;
  double seconds = 0;  // predicted step time (ProgramCost::step_s: overhead + critical path)
  double compute_seconds = 0;  // the step's compute, summed
  double comm_seconds = 0;     // the step's communication, summed (overlapped with compute)
  int64_t peak_bytes = 0;      // predicted peak memory per worker (persistent + transient)
};

struct Plan {
  std::vector<PlannedCandidate> best;  // best first (the chosen one is best[0])
  int evaluations = 0;                 // candidates the search asked for
  int lowerings = 0;                   // candidates lowered (the others were refused first)
  int refused = 0;                     // invalid or over the memory limit
  std::string last_refusal;
  double search_seconds = 0;   // wall time of the search
  std::string profile_source;  // PlanOptions::profile.source: what the predictions assume
};

// The predicted step time and peak memory of one candidate, the planner's evaluation: lowers,
// costs and sizes. InvalidArgument (the lowering's message) for an invalid layout;
// ResourceExhausted naming the peak and the limit for a candidate over options.memory_limit_bytes.
absl::StatusOr<PlannedCandidate> EvaluateLayout(const Graph& graph, const Mesh& mesh,
                                                const LayoutRules& rules,
                                                const PlanOptions& options);

// Searches `meshes` for the best candidates. NotFound (with the last refusal) when none is
// feasible; InvalidArgument for an empty mesh list.
absl::StatusOr<Plan> PlanLayout(const Graph& graph, const std::vector<Mesh>& meshes,
                                const PlanOptions& options);

// For people: the chosen mesh and rules, then the next candidates, each with its predicted time
// (compute / communication) and peak memory, and how many candidates were evaluated, lowered and
// refused in how long. Ends with a newline.
std::string ExplainPlan(const Plan& plan);

}  // namespace meshrt

#endif  // MESHRT_CORE_PLANNING_PLANNER_H_
