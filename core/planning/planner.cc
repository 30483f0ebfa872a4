#include "core/planning/planner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/lowering/lowering.h"
#include "core/planning/memory_model.h"
#include "util/status_macros.h"

namespace meshrt {

namespace {

struct Sized {
  PlannedCandidate candidate;
  std::string peak_op;
};

// The candidate's time and memory, whatever the limit.
absl::StatusOr<Sized> Evaluate(const Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                               const PlanOptions& options) {
  google::protobuf::Arena arena;
  ASSIGN_OR_RETURN(const v1::Program* lowered, Lower(graph, mesh, rules, &arena));
  const v1::Program& program = *lowered;
  const std::vector<std::string>* fetches = options.fetches.empty() ? nullptr : &options.fetches;
  MemoryOptions memory_options;
  memory_options.fetches = fetches;
  memory_options.top_tensors = 0;
  ASSIGN_OR_RETURN(const MemoryReport memory, ComputeMemory(program, memory_options));
  ASSIGN_OR_RETURN(const ProgramCost cost, CostProgramTotal(program, options.profile, fetches));
  Sized s{PlannedCandidate{mesh, rules}, memory.peak_op};
  s.candidate.compute_seconds = cost.total.compute_s;
  s.candidate.comm_seconds = cost.total.comm_s;
  s.candidate.seconds = cost.step_s;
  s.candidate.peak_bytes = memory.peak_bytes;
  return s;
}

bool OverLimit(const Sized& s, const PlanOptions& options) {
  return options.memory_limit_bytes > 0 && s.candidate.peak_bytes > options.memory_limit_bytes;
}

std::string OverLimitMessage(const Sized& s, const PlanOptions& options) {
  return absl::StrCat("peak ", HumanBytes(s.candidate.peak_bytes), " per worker (at '", s.peak_op,
                      "') is over the limit of ", HumanBytes(options.memory_limit_bytes));
}

}  // namespace

absl::StatusOr<PlannedCandidate> EvaluateLayout(const Graph& graph, const Mesh& mesh,
                                                const LayoutRules& rules,
                                                const PlanOptions& options) {
  ASSIGN_OR_RETURN(Sized s, Evaluate(graph, mesh, rules, options));
  if (OverLimit(s, options)) return absl::ResourceExhaustedError(OverLimitMessage(s, options));
  return s.candidate;
}

namespace {

// The distinct sets of dim names the graph's tensors have, each with the first tensor that has it:
// a candidate putting two dims of one set on one mesh dim is invalid (as ValidateLayouts would
// say), found without walking every tensor.
class DimSets {
 public:
  explicit DimSets(const Graph& graph) {
    std::set<std::vector<std::string>> seen;
    for (int i : graph.topological_order()) {
      const std::string& name = graph.op(i).name();
      std::vector<std::string> dims;
      for (const Dim& d : graph.type(name).shape.dims()) dims.push_back(d.name);
      if (dims.size() >= 2 && seen.insert(dims).second) sets_.push_back({dims, name});
    }
  }

  // InvalidArgument naming the tensor and the two dims when `rules` put two dims of one tensor
  // on one mesh dim.
  absl::Status Check(const LayoutRules& rules) const {
    for (const auto& [dims, tensor] : sets_) {
      std::map<int, const std::string*> axis_dim;
      for (const std::string& d : dims) {
        const int axis = rules.MeshAxisFor(d);
        if (axis == kReplicated) continue;
        auto [it, fresh] = axis_dim.emplace(axis, &d);
        if (!fresh) {
          return absl::InvalidArgumentError(
              absl::StrCat("tensor '", tensor, "' would have two dims, '", *it->second, "' and '",
                           d, "', on mesh dim '", rules.rules().at(d), "'"));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::pair<std::vector<std::string>, std::string>> sets_;
};

}  // namespace

absl::StatusOr<Plan> PlanLayout(const Graph& graph, const std::vector<Mesh>& meshes,
                                const PlanOptions& options) {
  if (meshes.empty()) return absl::InvalidArgumentError("the planner was given no mesh");
  const auto start = std::chrono::steady_clock::now();
  const DimSets dim_sets(graph);
  // The search keeps Evaluations; the planner keeps the split and the candidate itself.
  absl::Mutex mu;
  std::map<std::string, PlannedCandidate> planned;  // mesh | rules -> candidate
  int lowerings = 0;
  auto key = [](const Mesh& mesh, const LayoutRules& rules) {
    return absl::StrCat(mesh.ToString(), "|", rules.ToString());
  };
  EvaluateFn evaluate = [&](const Mesh& mesh,
                            const LayoutRules& rules) -> absl::StatusOr<Evaluation> {
    RETURN_IF_ERROR(dim_sets.Check(rules));
    {
      absl::MutexLock lock(&mu);
      ++lowerings;
    }
    ASSIGN_OR_RETURN(Sized s, Evaluate(graph, mesh, rules, options));
    Evaluation e{s.candidate.seconds, s.candidate.peak_bytes};
    if (OverLimit(s, options)) {
      e.fits = false;
      e.refusal = OverLimitMessage(s, options);
      return e;
    }
    absl::MutexLock lock(&mu);
    planned.emplace(key(mesh, rules), std::move(s.candidate));
    return e;
  };
  SearchOptions search = options.search;
  // Equal-size mesh dims are interchangeable only while every group costs the same: not when
  // the workers are on several hosts (a dim along which groups span hosts is slower).
  if (OnSeveralHosts(options.profile.processor_hosts)) search.mesh_symmetry = false;
  if (search.threads <= 0) {
    search.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  ASSIGN_OR_RETURN(SearchResult found, SearchLayouts(graph, meshes, evaluate, search));
  Plan plan;
  for (const Candidate& c : found.best) plan.best.push_back(planned.at(key(c.mesh, c.rules)));
  plan.evaluations = found.evaluations;
  plan.lowerings = lowerings;
  plan.refused = found.refused;
  plan.last_refusal = found.last_refusal;
  plan.profile_source = options.profile.source;
  plan.search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

namespace {

std::string CandidateLine(const PlannedCandidate& c) {
  const std::string rules = c.rules.ToString();
  return absl::StrFormat("mesh %s  layout %s  predicted %.3f ms (compute %.3f, comm %.3f)  peak %s",
                         c.mesh.ToString(), rules.empty() ? "(replicated)" : rules, c.seconds * 1e3,
                         c.compute_seconds * 1e3, c.comm_seconds * 1e3, HumanBytes(c.peak_bytes));
}

}  // namespace

std::string ExplainPlan(const Plan& plan) {
  std::string out;
  if (plan.best.empty()) return "planner: no candidate\n";
  absl::StrAppend(&out, "planner: chose ", CandidateLine(plan.best[0]), "\n");
  for (size_t i = 1; i < plan.best.size(); ++i) {
    const double slower =
        plan.best[0].seconds > 0 ? (plan.best[i].seconds / plan.best[0].seconds - 1) * 100 : 0;
    absl::StrAppend(&out, absl::StrFormat("  next %d: %s  (+%.1f%%)\n", static_cast<int>(i),
                                          CandidateLine(plan.best[i]), slower));
  }
  absl::StrAppend(
      &out, absl::StrFormat("  searched %d candidates (%d lowered, %d refused) in %.2f s\n",
                            plan.evaluations, plan.lowerings, plan.refused, plan.search_seconds));
  if (!plan.profile_source.empty()) {
    absl::StrAppend(&out, "  hardware profile: ", plan.profile_source, "\n");
  }
  if (plan.refused > 0 && !plan.last_refusal.empty()) {
    absl::StrAppend(&out, "  last refused: ", plan.last_refusal, "\n");
  }
  return out;
}

}  // namespace meshrt
