// ProgramBuilder: emits the instructions of one SPMD program (proto/program.proto) while lowering
// walks the graph. It tracks each laid-out tensor's buffer, global shape and layout, and owns the
// one resharding primitive every layout change goes through (Reshard, in reshard.cc).
//
// Errors: every method that can fail returns a Status. The builder is fed only by lowering code
// that has already validated the graph and its layouts, so a failed precondition is a lowering bug:
// Internal, naming the op being lowered (`source_op`, or the op itself) and what was inconsistent.
// Nothing here aborts the process.
//
// Not thread-safe; one builder per lowering.
#ifndef MESHRT_CORE_IR_PROGRAM_BUILDER_H_
#define MESHRT_CORE_IR_PROGRAM_BUILDER_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"
#include "google/protobuf/arena.h"
#include "proto/program.pb.h"

namespace meshrt {

// A tensor as the program holds it: every processor has the slice `layout` gives it in `buffer`.
// With `partial_sum_axes` non-empty the buffer holds a partial sum: the tensor is the sum of the
// buffers of the processors that differ only along those mesh axes (an einsum or reduce_sum over a
// split dim, before its allreduce or reduce-scatter). Reshard resolves partial sums.
struct LaidOutTensor {
  int buffer = -1;
  Shape shape;  // global (logical) shape
  DType dtype = DType::kFloat32;
  TensorLayout layout;
  std::vector<int> partial_sum_axes;
};

// One step of a reshard plan (ProgramBuilder::PlanReshard): the collective or local slice
// Reshard emits for it.
struct ReshardStep {
  enum class Kind {
    kAllReduce,      // resolves the partial sums over `mesh_axes`
    kReduceScatter,  // resolves the partial sum over mesh_axes[0] and splits `dim` over it
    kAllGather,      // mesh_axes[0] leaves the layout (its dim becomes whole)
    kAllToAll,       // mesh_axes[0] moves from the dim it splits to whole dim `dim`
    kSlice,          // whole dim `dim` is split over mesh_axes[0], which split nothing (local)
  };
  Kind kind = Kind::kAllGather;
  std::vector<int> mesh_axes;
  int dim = -1;
};

// The steps Reshard takes, in order, and the bytes each worker sends for them: the figure
// core/planning/explain.h CostOf gives the instructions emitted for them.
struct ReshardPlan {
  std::vector<ReshardStep> steps;
  int64_t sent_bytes = 0;
};

class ProgramBuilder {
 public:
  // With `arena`, the program is built on it (see FinishOnArena).
  ProgramBuilder(Mesh mesh, const LayoutRules& rules, google::protobuf::Arena* arena = nullptr);

  const Mesh& mesh() const { return mesh_; }

  // A placeholder: each processor is fed its slice. Internal if `layout`'s rank is not the shape's.
  absl::StatusOr<LaidOutTensor> AddInput(const std::string& name, const Shape& shape, DType dtype,
                                         const TensorLayout& layout);

  // Runs `op` on local slices. `op.inputs` is ignored (buffers come from `inputs`, which must not
  // be partial sums). The output has global `shape` and `layout`; its slice shape is what the
  // kernel is asked to produce. Internal on a partial-sum input or a layout of the wrong rank.
  absl::StatusOr<LaidOutTensor> EmitLocal(const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs,
                                          const Shape& shape, DType dtype,
                                          const TensorLayout& layout);

  // a + b for two partial sums over the same mesh axes with the same layout (a loop accumulating
  // partial sums before one reduction); local, the result keeps the partial-sum axes. Internal
  // when a and b differ in shape, dtype, layout or partial-sum axes.
  absl::StatusOr<LaidOutTensor> AddPartials(const LaidOutTensor& a, const LaidOutTensor& b,
                                            const std::string& source_op);

  // Allreduce over `mesh_axes` (the result keeps `in`'s shape and layout; those axes leave its
  // partial-sum axes). No-op when every axis has size 1. Internal on an axis not in the mesh.
  absl::StatusOr<LaidOutTensor> AllReduce(const LaidOutTensor& in, std::vector<int> mesh_axes,
                                          v1::ReduceOp op, const std::string& source_op);

  // Changes `in`'s layout to `target` (same shape) and resolves partial sums: reduce-scatter
  // (partial sum → split), allreduce (partial sum → whole), allgather (split → not split), local
  // slicing (not split → split) or alltoall (split on another dim), in the order that sends the
  // fewest bytes (PlanReshard): local slices before the exchanges they make smaller, and never a
  // gather where a direct exchange costs less. A partial sum is resolved to a given target once:
  // asked again (another consumer of the same buffer), Reshard returns the first result without
  // emitting anything.
  // Precondition: `target` is valid for the shape (CheckLayout). Internal when `target`'s rank is
  // not the tensor's, names an axis not in the mesh, or a partial sum is over an axis that also
  // splits `in`.
  absl::StatusOr<LaidOutTensor> Reshard(const LaidOutTensor& in, const TensorLayout& target,
                                        const std::string& source_op);

  // The steps Reshard(in, target) emits, without emitting them (so lowering can compare the cost
  // of alternatives; `in.buffer` is not read). Partial sums first, as Reshard says; then the
  // cheapest sequence of allgathers, alltoalls and local slices by bytes sent per worker (fewer
  // steps on a tie), found by a search over layouts (reshard.cc says why it is right). Internal in
  // the cases Reshard is.
  absl::StatusOr<ReshardPlan> PlanReshard(const LaidOutTensor& in, const TensorLayout& target,
                                          const std::string& source_op) const;

  // Collective permute along `mesh_axis`: processor with coordinate c along that axis receives the
  // slice of the processor at c - shift (mod the axis size when `wrap`; zeros when that is off the
  // mesh). The result keeps `in`'s shape and layout: the caller says what the moved slices mean
  // (e.g. a halo, or a block shifted by whole blocks). Emits nothing when the move is the identity
  // (shift 0, or a multiple of the axis size with `wrap`). Internal on an axis not in the mesh or
  // a partial-sum input.
  absl::StatusOr<LaidOutTensor> Permute(const LaidOutTensor& in, int mesh_axis, int shift,
                                        bool wrap, const std::string& source_op);

  // Every processor's slice becomes that of the processor of rank `root` in its group over
  // `mesh_axes` (see proto/program.proto). Keeps `in`'s shape and layout. No-op when every axis
  // has size 1. Internal unless 0 <= root < group size, on an axis not in the mesh, or on a
  // partial-sum input.
  absl::StatusOr<LaidOutTensor> Broadcast(const LaidOutTensor& in, std::vector<int> mesh_axes,
                                          int root, const std::string& source_op);

  // A program variable (core/ops/ops_state.h) for variable op `op`: its slice is in the returned
  // tensor's buffer at the start of every step; the initializer is `op` run as a local op. With
  // `partial_sum_axes` the variable is a partial sum over them (proto ProgramVariable), and so is
  // the returned tensor; the caller sees to it that `op` initialises zeros. Internal when a
  // partial axis is not in the mesh or splits a dim of `layout`.
  absl::StatusOr<LaidOutTensor> AddVariable(const v1::Op& op, const Shape& shape, DType dtype,
                                            const TensorLayout& layout,
                                            std::vector<int> partial_sum_axes = {});

  // The variable called `name` takes `value`'s slice after the step. Internal unless the variable
  // exists, has `value`'s layout, and `value` is a partial sum over exactly the variable's partial
  // axes (none for an ordinary variable).
  absl::Status SetVariableUpdate(const std::string& name, const LaidOutTensor& value);

  // The number of instructions emitted so far (the index the next one gets).
  int num_instructions() const { return program_.instructions_size(); }
  // Guards instructions [first, num_instructions()) by `predicate` (proto Instruction.predicate):
  // they run only on steps where that buffer is nonzero. Internal when `predicate` is not a
  // replicated scalar that is no partial sum, or `first` is out of range.
  absl::Status Guard(int first, const LaidOutTensor& predicate, const std::string& source_op);

  // Records that graph tensor `name` lives in `t` (what workers can fetch). Internal if `t` is a
  // partial sum. `resolved_on_fetch`: `t` only resolves a partial sum that consumers read
  // unresolved (proto ProgramTensor.resolved_on_fetch).
  absl::Status BindOutput(const std::string& name, const LaidOutTensor& t,
                          bool resolved_on_fetch = false);
  // Marks the bound output `name` resolved_on_fetch (as above); Internal if it is not bound.
  absl::Status MarkResolvedOnFetch(const std::string& name);

  // One-axis steps Reshard is made of (public so tests can drive them directly). Each changes one
  // mesh axis of `in`'s layout; Internal, naming `source_op`, when the layout does not allow it.
  // Allgather over `mesh_axis` of the dim it splits (Internal if it splits none).
  absl::StatusOr<LaidOutTensor> AllGather(const LaidOutTensor& in, int mesh_axis,
                                          const std::string& source_op);
  // Moves the split over `mesh_axis` to dim `to_dim`, which must be whole.
  absl::StatusOr<LaidOutTensor> AllToAll(const LaidOutTensor& in, int mesh_axis, int to_dim,
                                         const std::string& source_op);
  // Splits whole dim `dim` over `mesh_axis` by local slicing (no communication).
  absl::StatusOr<LaidOutTensor> LocalSlice(const LaidOutTensor& in, int mesh_axis, int dim,
                                           const std::string& source_op);
  // Resolves the partial sum over `mesh_axis` and splits whole dim `dim` over it.
  absl::StatusOr<LaidOutTensor> ReduceScatter(const LaidOutTensor& in, int mesh_axis, int dim,
                                              const std::string& source_op);

  v1::Program Finish() &&;
  // The program, built on the arena given to the constructor (which owns it). Only with an arena.
  v1::Program* FinishOnArena() &&;

 private:
  v1::Instruction* NewInstruction(const LaidOutTensor& out, const std::vector<int>& inputs,
                                  const std::string& source_op);
  // A new buffer for a tensor of `shape` in `layout`; Internal (naming `source_op`) when the
  // layout's rank is not the shape's or it names an axis not in the mesh.
  absl::StatusOr<LaidOutTensor> NewTensor(const Shape& shape, DType dtype,
                                          const TensorLayout& layout, const std::string& source_op);
  // Internal "lowering op 'source_op': what (a lowering bug)": a broken builder precondition.
  static absl::Status Broken(absl::string_view source_op, absl::string_view what);
  // "[a:m, b:-]" (dims and the mesh dims splitting them), or the raw axes when `layout` does not
  // fit `shape` on the mesh (the very thing an error may be about).
  std::string Described(const Shape& shape, const TensorLayout& layout) const;
  // Internal unless 0 <= axis < mesh ndims.
  absl::Status CheckAxis(int axis, const std::string& source_op) const;

  Mesh mesh_;
  // On the constructor's arena (owned by it), else owned by `owned_`.
  std::unique_ptr<v1::Program> owned_;
  v1::Program& program_;
  // Partial sums resolved so far: (partial buffer, target layout) -> the resolved tensor.
  std::map<std::pair<int, std::vector<int>>, LaidOutTensor> resolved_;
};

}  // namespace meshrt

#endif  // MESHRT_CORE_IR_PROGRAM_BUILDER_H_
