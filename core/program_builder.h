// ProgramBuilder: emits the instructions of one SPMD program (proto/program.proto) while lowering
// walks the graph. It tracks each laid-out tensor's buffer, global shape and layout, and owns the
// one resharding primitive every layout change goes through (Reshard, in reshard.cc).
//
// Not thread-safe; one builder per lowering.
#ifndef MESHRT_CORE_PROGRAM_BUILDER_H_
#define MESHRT_CORE_PROGRAM_BUILDER_H_

#include <string>
#include <vector>

#include "core/mesh.h"
#include "core/shape.h"
#include "core/tensor.h"
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

class ProgramBuilder {
 public:
  ProgramBuilder(Mesh mesh, const LayoutRules& rules);

  const Mesh& mesh() const { return mesh_; }

  // A placeholder: each processor is fed its slice.
  LaidOutTensor AddInput(const std::string& name, const Shape& shape, DType dtype,
                         const TensorLayout& layout);

  // Runs `op` on local slices. `op.inputs` is ignored (buffers come from `inputs`, which must not
  // be partial sums). The output has global `shape` and `layout`; its slice shape is what the
  // kernel is asked to produce.
  LaidOutTensor EmitLocal(const v1::Op& op, const std::vector<LaidOutTensor>& inputs,
                          const Shape& shape, DType dtype, const TensorLayout& layout);

  // a + b for two partial sums over the same mesh axes with the same layout (a loop accumulating
  // partial sums before one reduction); local, the result keeps the partial-sum axes.
  LaidOutTensor AddPartials(const LaidOutTensor& a, const LaidOutTensor& b,
                            const std::string& source_op);

  // Allreduce over `mesh_axes` (the result keeps `in`'s shape and layout; those axes leave its
  // partial-sum axes). No-op when every axis has size 1.
  LaidOutTensor AllReduce(const LaidOutTensor& in, std::vector<int> mesh_axes, v1::ReduceOp op,
                          const std::string& source_op);

  // Changes `in`'s layout to `target` (same shape) and resolves partial sums. Per mesh axis:
  // reduce-scatter (partial sum → split), allreduce (partial sum → whole), allgather (split → not
  // split), local slicing (not split → split) or alltoall (split on another dim). Never gathers a
  // whole tensor where a direct exchange exists, except to break a cycle of moves between dims.
  // Precondition: `target` is valid for the shape (CheckLayout).
  LaidOutTensor Reshard(const LaidOutTensor& in, const TensorLayout& target,
                        const std::string& source_op);

  // Collective permute along `mesh_axis`: processor with coordinate c along that axis receives the
  // slice of the processor at c - shift (mod the axis size when `wrap`; zeros when that is off the
  // mesh). The result keeps `in`'s shape and layout: the caller says what the moved slices mean
  // (e.g. a halo, or a block shifted by whole blocks). Emits nothing when the move is the identity
  // (shift 0, or a multiple of the axis size with `wrap`).
  LaidOutTensor Permute(const LaidOutTensor& in, int mesh_axis, int shift, bool wrap,
                        const std::string& source_op);

  // Every processor's slice becomes that of the processor of rank `root` in its group over
  // `mesh_axes` (see proto/program.proto). Keeps `in`'s shape and layout. No-op when every axis
  // has size 1. Precondition (CHECKed): 0 <= root < group size.
  LaidOutTensor Broadcast(const LaidOutTensor& in, std::vector<int> mesh_axes, int root,
                          const std::string& source_op);

  // A program variable (core/ops_state.h) for variable op `op`: its slice is in the returned
  // tensor's buffer at the start of every step; the initializer is `op` run as a local op.
  LaidOutTensor AddVariable(const v1::Op& op, const Shape& shape, DType dtype,
                            const TensorLayout& layout);

  // The variable called `name` takes `value`'s slice after the step. Preconditions (CHECKed): the
  // variable exists, has `value`'s layout, and `value` is no partial sum.
  void SetVariableUpdate(const std::string& name, const LaidOutTensor& value);

  // Records that graph tensor `name` lives in `t` (what workers can fetch).
  void BindOutput(const std::string& name, const LaidOutTensor& t);

  v1::Program Finish() &&;

 private:
  v1::Instruction* NewInstruction(const LaidOutTensor& out, const std::vector<int>& inputs,
                                  const std::string& source_op);
  LaidOutTensor NewTensor(const Shape& shape, DType dtype, const TensorLayout& layout);
  // One-axis steps used by Reshard.
  LaidOutTensor AllGather(const LaidOutTensor& in, int mesh_axis, const std::string& source_op);
  LaidOutTensor AllToAll(const LaidOutTensor& in, int mesh_axis, int to_dim,
                         const std::string& source_op);
  LaidOutTensor LocalSlice(const LaidOutTensor& in, int mesh_axis, int dim,
                           const std::string& source_op);
  LaidOutTensor ReduceScatter(const LaidOutTensor& in, int mesh_axis, int dim,
                              const std::string& source_op);

  Mesh mesh_;
  v1::Program program_;
};

}  // namespace meshrt

#endif  // MESHRT_CORE_PROGRAM_BUILDER_H_
