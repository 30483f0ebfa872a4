// ProgramBuilder::Reshard: the one primitive through which every layout change goes, and
// PlanReshard, which chooses its steps.
//
// First partial sums: a pending sum over mesh axis m becomes a reduce-scatter when B splits a dim
// over m that C holds whole (the sum and the split in one collective, (g-1)/g of an allreduce's
// traffic), else part of one allreduce over every remaining partial axis.
//
// Then the layout, from the current C to the target B, by one-axis steps:
//   allgather over m along the dim m splits      (m leaves the layout)
//   alltoall over m, from the dim it splits to a whole dim j
//   local slice of a whole dim j over an m that splits nothing (no communication)
// The plan is the cheapest sequence of such steps by the bytes each worker sends (what
// core/planning/explain.h CostOf reports), fewer steps breaking ties, then gathers before alltoalls before
// slices. It is found by a shortest-path search over layouts (Dijkstra; a handful of states for
// the ranks and meshes we lower), which is what makes these right without a rule for each:
//   - a slice goes before a gather or alltoall on another dim: processors that exchange over m
//     share their coordinate on every other axis, so they hold the same block of the sliced dim,
//     and the exchange moves 1/g of the bytes ([a:rows, b] -> [a, b:cols] slices b, then gathers
//     a quarter of the tensor on a 2x2 mesh instead of half);
//   - a split that changes mesh dim on the same tensor dim ([a:rows] -> [a:cols]) needs rows to
//     leave the layout, which only a gather over rows does (an alltoall over rows keeps a split
//     over rows); where the axes are big enough it is cheaper to move rows onto another dim by
//     alltoall, slice a over cols and gather the smaller rest than to gather a whole;
//   - a cycle of moves (dim 0 to 1 over m while dim 1 goes to 0 over m') is broken where it costs
//     least, by a gather or by parking one split on a third dim.
// Mesh axes of size 1 only relabel the layout.
#include <algorithm>
#include <array>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// float32 and int32 alike (explain's CostOf counts the same).
constexpr int64_t kElementBytes = 4;
// Layouts the search may expand before it settles for gathering whatever differs and slicing:
// far above what a rank-8 tensor on a 4-dim mesh needs, and a bound on lowering time.
constexpr int kMaxExpansions = 20000;

int DimOf(const std::vector<int>& layout, int axis) {
  auto it = std::find(layout.begin(), layout.end(), axis);
  return it == layout.end() ? -1 : static_cast<int>(it - layout.begin());
}

// A search path: its cost, its steps as (kind rank, axis, dim) for the tie-break, and where it is.
struct Path {
  int64_t sent = 0;
  std::vector<std::array<int, 3>> keys;
  std::vector<ReshardStep> steps;
  std::vector<int> layout;
};

struct Cheaper {
  bool operator()(const Path& a, const Path& b) const {
    if (a.sent != b.sent) return a.sent < b.sent;
    if (a.keys.size() != b.keys.size()) return a.keys.size() < b.keys.size();
    if (a.keys != b.keys) return a.keys < b.keys;
    return a.layout < b.layout;
  }
};

}  // namespace

absl::StatusOr<ReshardPlan> ProgramBuilder::PlanReshard(const LaidOutTensor& in,
                                                        const TensorLayout& target,
                                                        const std::string& source_op) const {
  if (target.mesh_axis.size() != in.layout.mesh_axis.size() ||
      static_cast<int>(in.layout.mesh_axis.size()) != in.shape.rank()) {
    return Broken(source_op, absl::StrCat("reshard of ", Described(in.shape, in.layout),
                                          " to a target layout of rank ", target.mesh_axis.size()));
  }
  for (const TensorLayout* l : {&in.layout, &target}) {
    for (int a : l->mesh_axis) {
      if (a != kReplicated) RETURN_IF_ERROR(CheckAxis(a, source_op));
    }
  }
  auto bytes = [&](const std::vector<int>& layout) {
    return SliceShape(in.shape, TensorLayout{layout}, mesh_).num_elements() * kElementBytes;
  };
  ReshardPlan plan;
  std::vector<int> cur = in.layout.mesh_axis;
  // Partial sums.
  if (!in.partial_sum_axes.empty()) {
    ReshardStep reduce{ReshardStep::Kind::kAllReduce, {}, -1};
    for (int axis : in.partial_sum_axes) {
      RETURN_IF_ERROR(CheckAxis(axis, source_op));
      if (DimOf(cur, axis) >= 0) {
        return Broken(source_op,
                      absl::StrCat("a partial sum over mesh axis ", axis, ", which also splits ",
                                   Described(in.shape, in.layout)));
      }
      const int g = mesh_.size(axis);
      const int to = DimOf(target.mesh_axis, axis);
      if (g > 1 && to >= 0 && cur[to] == kReplicated) {
        cur[to] = axis;
        plan.steps.push_back({ReshardStep::Kind::kReduceScatter, {axis}, to});
        plan.sent_bytes += (g - 1) * bytes(cur);
      } else {
        reduce.mesh_axes.push_back(axis);
      }
    }
    if (!reduce.mesh_axes.empty()) {
      int g = 1;
      for (int a : reduce.mesh_axes) g *= mesh_.size(a);
      plan.sent_bytes += 2 * (g - 1) * bytes(cur) / g;
      plan.steps.push_back(std::move(reduce));
    }
  }
  // The layout search, over the axes that split something (size-1 axes only relabel).
  std::vector<int> goal = target.mesh_axis;
  for (std::vector<int>* l : {&cur, &goal}) {
    for (int& a : *l) {
      if (a != kReplicated && mesh_.size(a) == 1) a = kReplicated;
    }
  }
  const int rank = in.shape.rank();
  // Only axes that split something before or after take part: slicing over any other would have
  // to be gathered again.
  std::vector<bool> involved(mesh_.ndims(), false);
  for (const std::vector<int>* l : {&cur, &goal}) {
    for (int a : *l) {
      if (a != kReplicated) involved[a] = true;
    }
  }
  auto fits = [&](int dim, int axis) {
    return in.shape.dim(dim).size % mesh_.size(axis) == 0 || goal[dim] == axis;
  };
  std::set<Path, Cheaper> frontier;
  std::set<std::vector<int>> settled;
  frontier.insert(Path{0, {}, {}, cur});
  int expansions = 0;
  while (!frontier.empty() && expansions < kMaxExpansions) {
    Path p = *frontier.begin();
    frontier.erase(frontier.begin());
    if (!settled.insert(p.layout).second) continue;
    if (p.layout == goal) {
      plan.sent_bytes += p.sent;
      for (ReshardStep& s : p.steps) plan.steps.push_back(std::move(s));
      return plan;
    }
    ++expansions;
    auto add = [&](int kind_rank, ReshardStep step, std::vector<int> layout, int64_t sent) {
      if (settled.count(layout)) return;
      Path next{p.sent + sent, p.keys, p.steps, std::move(layout)};
      next.keys.push_back({kind_rank, step.mesh_axes[0], step.dim});
      next.steps.push_back(std::move(step));
      frontier.insert(std::move(next));
    };
    for (int axis = 0; axis < mesh_.ndims(); ++axis) {
      const int g = mesh_.size(axis);
      if (!involved[axis]) continue;
      const int from = DimOf(p.layout, axis);
      for (int j = -1; j < rank; ++j) {  // j = -1: a gather
        if (j >= 0 && (p.layout[j] != kReplicated || !fits(j, axis))) continue;
        std::vector<int> next = p.layout;
        if (from >= 0) next[from] = kReplicated;
        if (j >= 0) next[j] = axis;
        if (from >= 0) {
          const int64_t sent = (g - 1) * bytes(next) / g;
          if (j < 0) {
            add(0, {ReshardStep::Kind::kAllGather, {axis}, from}, std::move(next), sent);
          } else {
            add(1, {ReshardStep::Kind::kAllToAll, {axis}, j}, std::move(next), sent);
          }
        } else if (j >= 0) {
          add(2, {ReshardStep::Kind::kSlice, {axis}, j}, std::move(next), 0);
        }
      }
    }
  }
  // Not found within the bound (the goal is always reachable: gathers, then slices): gather every
  // axis whose dim differs from the goal, then slice. Always valid, never cheaper.
  for (int axis = 0; axis < mesh_.ndims(); ++axis) {
    const int from = DimOf(cur, axis);
    if (from < 0 || goal[from] == axis) continue;
    cur[from] = kReplicated;
    const int g = mesh_.size(axis);
    plan.steps.push_back({ReshardStep::Kind::kAllGather, {axis}, from});
    plan.sent_bytes += (g - 1) * bytes(cur) / g;
  }
  for (int d = 0; d < rank; ++d) {
    if (goal[d] == kReplicated || cur[d] == goal[d]) continue;
    cur[d] = goal[d];
    plan.steps.push_back({ReshardStep::Kind::kSlice, {goal[d]}, d});
  }
  return plan;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::Reshard(const LaidOutTensor& in,
                                                      const TensorLayout& target,
                                                      const std::string& source_op) {
  // A partial sum resolved once to a target is not resolved again (lazy partial sums: the
  // tensor's fetch and its consumers share one resolve).
  const std::pair<int, std::vector<int>> key(in.buffer, target.mesh_axis);
  if (!in.partial_sum_axes.empty()) {
    auto done = resolved_.find(key);
    if (done != resolved_.end()) return done->second;
  }
  ASSIGN_OR_RETURN(const ReshardPlan plan, PlanReshard(in, target, source_op));
  LaidOutTensor cur = in;
  // Once partial sums are resolved, size-1 axes stop labelling dims (as the plan's layouts do).
  bool relabelled = false;
  auto relabel = [&] {
    for (int& a : cur.layout.mesh_axis) {
      if (a != kReplicated && mesh_.size(a) == 1) a = kReplicated;
    }
    relabelled = true;
  };
  auto apply = [&](const ReshardStep& s) -> absl::StatusOr<LaidOutTensor> {
    switch (s.kind) {
      case ReshardStep::Kind::kAllReduce:
        return AllReduce(cur, s.mesh_axes, v1::REDUCE_SUM, source_op);
      case ReshardStep::Kind::kReduceScatter:
        return ReduceScatter(cur, s.mesh_axes[0], s.dim, source_op);
      case ReshardStep::Kind::kAllGather:
        return AllGather(cur, s.mesh_axes[0], source_op);
      case ReshardStep::Kind::kAllToAll:
        return AllToAll(cur, s.mesh_axes[0], s.dim, source_op);
      case ReshardStep::Kind::kSlice:
        return LocalSlice(cur, s.mesh_axes[0], s.dim, source_op);
    }
    return Broken(source_op, "a reshard step of no known kind");
  };
  for (const ReshardStep& s : plan.steps) {
    if (!relabelled && s.kind != ReshardStep::Kind::kAllReduce &&
        s.kind != ReshardStep::Kind::kReduceScatter) {
      relabel();
    }
    ASSIGN_OR_RETURN(cur, apply(s));
  }
  if (!relabelled) relabel();
  // Size-1 axes of the target: a relabel (the slices are the same either way).
  for (int d = 0; d < cur.shape.rank(); ++d) {
    const int a = target.mesh_axis[d];
    if (a != kReplicated && cur.layout.mesh_axis[d] == kReplicated && mesh_.size(a) == 1) {
      cur.layout.mesh_axis[d] = a;
    }
  }
  if (cur.layout != target) {
    return Broken(source_op, absl::StrCat("reshard reached ", Described(cur.shape, cur.layout),
                                          ", not its target ", Described(cur.shape, target)));
  }
  if (!in.partial_sum_axes.empty()) resolved_.emplace(key, cur);
  return cur;
}

}  // namespace meshrt
