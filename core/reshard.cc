// ProgramBuilder::Reshard: the one primitive through which every layout change goes.
//
// First partial sums: a pending sum over mesh axis m becomes a reduce-scatter when B splits a dim
// over m that C holds whole (the sum and the split in one collective, (g-1)/g of an allreduce's
// traffic), else part of one allreduce over every remaining partial axis.
// Then, per mesh axis m, comparing the current layout C with the target B:
//   C splits dim i over m, B splits nothing over m   -> allgather over m along i
//   C splits dim i over m, B splits dim j != i       -> alltoall over m (split j, concat i)
//   C splits nothing over m, B splits dim j          -> local slice of j (no communication)
// Order: removals first (they free dims), then moves whose target dim is free, repeated; a cycle of
// moves (dim 0 to 1 over m while dim 1 goes to 0 over m') is broken by gathering one of them, which
// costs more bytes than a direct exchange but is the only way our one-axis-per-dim layouts allow.
// Local slices come last, after all data that must move has moved, so they never discard data a
// later exchange would need. Mesh axes of size 1 only relabel the layout.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/program_builder.h"
#include "core/status_macros.h"

namespace meshrt {

absl::StatusOr<LaidOutTensor> ProgramBuilder::Reshard(const LaidOutTensor& in,
                                                      const TensorLayout& target,
                                                      const std::string& source_op) {
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
  const std::pair<int, std::vector<int>> key(in.buffer, target.mesh_axis);
  if (!in.partial_sum_axes.empty()) {
    auto done = resolved_.find(key);
    if (done != resolved_.end()) return done->second;
  }
  LaidOutTensor cur = in;
  auto dim_of = [](const TensorLayout& l, int axis) {
    auto it = std::find(l.mesh_axis.begin(), l.mesh_axis.end(), axis);
    return it == l.mesh_axis.end() ? -1 : static_cast<int>(it - l.mesh_axis.begin());
  };
  // Partial sums.
  if (!cur.partial_sum_axes.empty()) {
    std::vector<int> rest;
    for (int axis : std::vector<int>(cur.partial_sum_axes)) {
      RETURN_IF_ERROR(CheckAxis(axis, source_op));
      if (dim_of(cur.layout, axis) >= 0) {
        return Broken(source_op,
                      absl::StrCat("a partial sum over mesh axis ", axis, ", which also splits ",
                                   Described(cur.shape, cur.layout)));
      }
      const int to = dim_of(target, axis);
      if (mesh_.size(axis) > 1 && to >= 0 && cur.layout.mesh_axis[to] == kReplicated) {
        ASSIGN_OR_RETURN(cur, ReduceScatter(cur, axis, to, source_op));
      } else {
        rest.push_back(axis);
      }
    }
    ASSIGN_OR_RETURN(cur, AllReduce(cur, rest, v1::REDUCE_SUM, source_op));
  }
  // Size-1 mesh axes: relabel only (slices are identical either way).
  for (int d = 0; d < cur.shape.rank(); ++d) {
    int a = cur.layout.mesh_axis[d];
    if (a != kReplicated && mesh_.size(a) == 1) cur.layout.mesh_axis[d] = kReplicated;
  }
  // Removals.
  for (int axis = 0; axis < mesh_.ndims(); ++axis) {
    if (dim_of(cur.layout, axis) >= 0 && dim_of(target, axis) < 0) {
      ASSIGN_OR_RETURN(cur, AllGather(cur, axis, source_op));
    }
  }
  // Moves.
  while (true) {
    std::vector<int> pending;
    for (int axis = 0; axis < mesh_.ndims(); ++axis) {
      int from = dim_of(cur.layout, axis), to = dim_of(target, axis);
      if (from >= 0 && to >= 0 && from != to) pending.push_back(axis);
    }
    if (pending.empty()) break;
    bool progressed = false;
    for (int axis : pending) {
      int to = dim_of(target, axis);
      if (cur.layout.mesh_axis[to] == kReplicated) {
        ASSIGN_OR_RETURN(cur, AllToAll(cur, axis, to, source_op));
        progressed = true;
      }
    }
    if (!progressed) {  // break a cycle
      ASSIGN_OR_RETURN(cur, AllGather(cur, pending.front(), source_op));
    }
  }
  // Additions.
  for (int d = 0; d < cur.shape.rank(); ++d) {
    int a = target.mesh_axis[d];
    if (a == kReplicated || cur.layout.mesh_axis[d] != kReplicated) continue;
    if (mesh_.size(a) == 1) {
      cur.layout.mesh_axis[d] = a;
    } else {
      ASSIGN_OR_RETURN(cur, LocalSlice(cur, a, d, source_op));
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
