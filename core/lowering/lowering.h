// SPMD lowering: turns a validated Graph, a Mesh and LayoutRules into one v1::Program that every
// processor runs with its own mesh coordinate (see proto/program.proto).
//
// How each op family lowers (one file each, lower_*.cc):
//   placeholder / constant   program input / local constant, then local slicing to the layout
//   elementwise              local; never communicates
//   einsum                   local einsum on slices, giving partial sums over the mesh axes of
//                            every reduced dim that is split; inputs whose dims would put one mesh
//                            axis on two einsum dims are first resharded so each axis splits one
//   reduce_*                 local reduce; sum and mean give partial sums over the mesh axes of
//                            split reduced dims (mean: local sum scaled by 1/count), max / min /
//                            any / all an allreduce(op) over them
//   reshape / rename_dim     reshard the input so only dims the reshape keeps in step are split
//                            (moving splits directly with alltoall), local reshape, then reshard
//                            to the output layout; a kept split moves on whichever side is cheaper
// Partial sums are lazy (lower_partial.cc, Mesh-TensorFlow's LazyAllreduceSum): an op linear in
// them (add/sub of two, neg, scale, mul/div by a factor that is the same on the processors summed,
// where, a dtype-keeping cast, reduce_sum/mean, reshapes) that is their only reader runs on the
// unresolved buffers, and the sum is resolved once — by Reshard to the rule layout: allreduce, or
// reduce-scatter where the rules split a dim over the summed axis — where an op needs the value.
// Every graph tensor is bound as a program output in the layout the rules give it; a partial sum
// through a resolve that consumers needing the value share. A resolve no instruction reads is
// marked resolved_on_fetch: a step pruned to its fetches (runtime/executor.h) runs it only when
// that tensor is fetched, and core/planning/explain.h counts it apart.
#ifndef MESHRT_CORE_LOWERING_LOWERING_H_
#define MESHRT_CORE_LOWERING_LOWERING_H_

#include "absl/status/statusor.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "google/protobuf/arena.h"
#include "proto/program.pb.h"

namespace meshrt {

// Checks every tensor's layout under `rules` on `mesh` (CheckLayout): InvalidArgument naming the
// tensor, the op that made it, the dims, and a fix.
absl::Status ValidateLayouts(const Graph& graph, const Mesh& mesh, const LayoutRules& rules);

// Validates layouts, then lowers. Errors: those of ValidateLayouts; InvalidArgument naming the op
// when an op cannot be lowered as given; Internal naming the op for a broken lowering invariant
// (a bug, reported rather than aborting the caller). Never aborts on any validated Graph.
absl::StatusOr<v1::Program> Lower(const Graph& graph, const Mesh& mesh, const LayoutRules& rules);
// The same program, built on `arena` (non-null), which owns it: for callers that lower many
// candidates and drop them (core/planning/planner.h), allocating and freeing it then costs next to nothing.
absl::StatusOr<v1::Program*> Lower(const Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                                   google::protobuf::Arena* arena);

}  // namespace meshrt

#endif  // MESHRT_CORE_LOWERING_LOWERING_H_
