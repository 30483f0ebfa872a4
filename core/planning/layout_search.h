// The search space of automatic layouts (issue 15, `--layout auto` and `--mesh auto:N`), and a
// bounded, deterministic search over it with a pluggable evaluation.
//
// A candidate is a mesh and a set of layout rules. Meshes for N workers are N's ordered
// factorisations into at most `max_dims` factors of at least 2 (8: 8, 2x4, 4x2, 2x2x2), named
// x (1-D), rows/cols (2-D), or d0, d1, d2 (3-D and more). Rules map graph dims to mesh dims; a
// move adds one rule "d:m" for a graph dim d not yet mapped whose size the mesh dim's size
// divides. The search is a beam search from the empty rules (replicate everything): each round
// expands every kept candidate by every move, evaluates the new ones, and keeps the `beam` best;
// it stops when a round improves nothing, after `max_rounds`, or when `max_evaluations` is spent.
// Candidates the evaluation refuses (an error: the layout is invalid) are counted, never kept;
// those it marks as not fitting (Evaluation::fits false) are counted as refused and never
// results, but stay in the beam behind the ones that fit, the smallest peak first. Ties break by the rules' text, so the result is the same on every run.
// With SearchOptions::mesh_symmetry, rules equal up to a permutation of equal-size mesh dims
// (batch:rows and batch:cols on 4x4) are evaluated once.
//
// What a candidate costs is the caller's: an Evaluate function (the planner's lowers the graph
// and predicts the step time and peak memory; tests pass closed-form costs).
//
// Thread-safety: pure functions. Evaluate is called from the calling thread only, unless
// SearchOptions::threads > 1 (then from that many threads at once).
#ifndef MESHRT_CORE_PLANNING_LAYOUT_SEARCH_H_
#define MESHRT_CORE_PLANNING_LAYOUT_SEARCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"

namespace meshrt {

// The meshes of `workers` processors with at most `max_dims` dims, each of size >= 2, in a fixed
// order (fewer dims first, then the sizes lexicographically); workers == 1: {"x:1"}.
// InvalidArgument for workers < 1 or max_dims < 1.
absl::StatusOr<std::vector<Mesh>> MeshesFor(int workers, int max_dims = 3);

// "auto:8" -> 8; anything else (including "auto:0" and "auto:x") is InvalidArgument naming the
// text and the expected form.
absl::StatusOr<int> ParseAutoMesh(absl::string_view text);

struct Evaluation {
  double seconds = 0;      // predicted step time (lower is better)
  int64_t peak_bytes = 0;  // predicted peak memory per worker
  // False: over the memory limit (`refusal` says why). Such a candidate is refused (never a
  // result) but may stay in the beam, ranked by peak_bytes after every one that fits, as a step
  // towards rules that fit (at the paper's scale nothing with fewer than three rules fits).
  bool fits = true;
  std::string refusal;
};

// Evaluates a candidate; a non-OK status means the candidate is infeasible (why is kept for the
// report of the best refused candidate).
using EvaluateFn = std::function<absl::StatusOr<Evaluation>(const Mesh&, const LayoutRules&)>;

struct SearchOptions {
  int beam = 4;
  int max_rounds = 6;
  int max_evaluations = 400;
  int keep = 5;  // how many of the best candidates the result lists
  // Rules that differ only by a permutation of mesh dims of equal size are one candidate (the
  // first met is evaluated and kept): right while the evaluation cannot tell such dims apart
  // (core/planning/cost_model.h models every group as on one host).
  bool mesh_symmetry = true;
  // Threads evaluating a round's candidates (Evaluate must then be thread-safe); the result is
  // the same for any number.
  int threads = 1;
};

struct Candidate {
  Mesh mesh;
  LayoutRules rules;
  Evaluation evaluation;
};

struct SearchResult {
  std::vector<Candidate> best;  // best first, at most options.keep
  int evaluations = 0;
  int refused = 0;
  std::string last_refusal;  // the message of the last refused candidate ("" when none)
  // Among the candidates that did not fit, the one of the smallest peak, and its refusal ("").
  int64_t closest_peak_bytes = -1;
  std::string closest_refusal;
};

// The moves of `graph` on `mesh`: every (graph dim, mesh dim) whose sizes divide, the graph dims
// in name order, the mesh dims in mesh order.
std::vector<std::pair<std::string, std::string>> LayoutMoves(const Graph& graph, const Mesh& mesh);

// Searches every mesh of `meshes` (each from the empty rules). NotFound when no candidate of any
// mesh is feasible (with the last refusal's message).
absl::StatusOr<SearchResult> SearchLayouts(const Graph& graph, const std::vector<Mesh>& meshes,
                                           const EvaluateFn& evaluate,
                                           const SearchOptions& options = {});

}  // namespace meshrt

#endif  // MESHRT_CORE_PLANNING_LAYOUT_SEARCH_H_
