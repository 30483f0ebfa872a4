#include "core/program_builder.h"

#include <algorithm>

#include "core/logging.h"

namespace meshrt {

ProgramBuilder::ProgramBuilder(Mesh mesh, const LayoutRules& rules) : mesh_(std::move(mesh)) {
  *program_.mutable_mesh() = mesh_.ToProto();
  *program_.mutable_rules() = rules.ToProto();
}

LaidOutTensor ProgramBuilder::NewTensor(const Shape& shape, DType dtype,
                                        const TensorLayout& layout) {
  MESHRT_CHECK(static_cast<int>(layout.mesh_axis.size()) == shape.rank(), shape.ToString());
  LaidOutTensor t;
  t.buffer = program_.num_buffers();
  program_.set_num_buffers(t.buffer + 1);
  t.shape = shape;
  t.dtype = dtype;
  t.layout = layout;
  return t;
}

v1::Instruction* ProgramBuilder::NewInstruction(const LaidOutTensor& out,
                                                const std::vector<int>& inputs,
                                                const std::string& source_op) {
  v1::Instruction* inst = program_.add_instructions();
  inst->set_output(out.buffer);
  for (int b : inputs) inst->add_inputs(b);
  *inst->mutable_slice_shape() = SliceShape(out.shape, out.layout, mesh_).ToProto();
  inst->set_dtype(DTypeToProto(out.dtype));
  inst->set_source_op(source_op);
  *inst->mutable_global_shape() = out.shape.ToProto();
  *inst->mutable_layout() = out.layout.ToProto();
  return inst;
}

LaidOutTensor ProgramBuilder::AddInput(const std::string& name, const Shape& shape, DType dtype,
                                       const TensorLayout& layout) {
  LaidOutTensor t = NewTensor(shape, dtype, layout);
  v1::ProgramTensor* in = program_.add_inputs();
  in->set_name(name);
  in->set_buffer(t.buffer);
  *in->mutable_shape() = shape.ToProto();
  in->set_dtype(DTypeToProto(dtype));
  *in->mutable_layout() = layout.ToProto();
  return t;
}

LaidOutTensor ProgramBuilder::EmitLocal(const v1::Op& op, const std::vector<LaidOutTensor>& inputs,
                                        const Shape& shape, DType dtype,
                                        const TensorLayout& layout) {
  LaidOutTensor out = NewTensor(shape, dtype, layout);
  std::vector<int> buffers;
  for (const LaidOutTensor& in : inputs) {
    MESHRT_CHECK(in.partial_sum_axes.empty(), "a local op reads a partial sum: ", op.name());
    buffers.push_back(in.buffer);
  }
  v1::Instruction* inst = NewInstruction(out, buffers, op.name());
  v1::Op* local = inst->mutable_local();
  *local = op;
  local->clear_inputs();
  // Shape-carrying ops state the slice shape, so a local op reads as the kernel runs it.
  if (op.has_shape() && op.type() != "placeholder") *local->mutable_shape() = inst->slice_shape();
  return out;
}

LaidOutTensor ProgramBuilder::AddVariable(const v1::Op& op, const Shape& shape, DType dtype,
                                          const TensorLayout& layout) {
  LaidOutTensor t = NewTensor(shape, dtype, layout);
  v1::ProgramVariable* var = program_.add_variables();
  var->set_name(op.name());
  var->set_buffer(t.buffer);
  *var->mutable_shape() = shape.ToProto();
  var->set_dtype(DTypeToProto(dtype));
  *var->mutable_layout() = layout.ToProto();
  var->set_update_buffer(-1);
  // The initializer is an instruction like any local op, kept aside: the executor runs it only
  // when the processor has no slice of the variable yet.
  v1::Instruction* inst = NewInstruction(t, {}, op.name());
  *inst->mutable_local() = op;
  *inst->mutable_local()->mutable_shape() = inst->slice_shape();
  *var->mutable_initializer() = *inst;
  program_.mutable_instructions()->RemoveLast();
  return t;
}

void ProgramBuilder::SetVariableUpdate(const std::string& name, const LaidOutTensor& value) {
  MESHRT_CHECK(value.partial_sum_axes.empty(), "variable ", name, " assigned a partial sum");
  for (v1::ProgramVariable& var : *program_.mutable_variables()) {
    if (var.name() != name) continue;
    MESHRT_CHECK(TensorLayout::FromProto(var.layout()) == value.layout, "variable ", name,
                 " assigned a value in another layout");
    var.set_update_buffer(value.buffer);
    return;
  }
  MESHRT_CHECK(false, "no program variable ", name);
}

LaidOutTensor ProgramBuilder::AddPartials(const LaidOutTensor& a, const LaidOutTensor& b,
                                          const std::string& source_op) {
  MESHRT_CHECK(a.layout == b.layout && a.partial_sum_axes == b.partial_sum_axes &&
                   a.shape == b.shape && a.dtype == b.dtype,
               "adding unlike partial sums for ", source_op);
  LaidOutTensor out = NewTensor(a.shape, a.dtype, a.layout);
  out.partial_sum_axes = a.partial_sum_axes;
  v1::Op* add = NewInstruction(out, {a.buffer, b.buffer}, source_op)->mutable_local();
  add->set_name(source_op);
  add->set_type("add");
  return out;
}

LaidOutTensor ProgramBuilder::AllReduce(const LaidOutTensor& in, std::vector<int> mesh_axes,
                                        v1::ReduceOp op, const std::string& source_op) {
  std::sort(mesh_axes.begin(), mesh_axes.end());
  LaidOutTensor result = in;
  for (int a : mesh_axes) {
    result.partial_sum_axes.erase(
        std::remove(result.partial_sum_axes.begin(), result.partial_sum_axes.end(), a),
        result.partial_sum_axes.end());
  }
  mesh_axes.erase(std::remove_if(mesh_axes.begin(), mesh_axes.end(),
                                 [&](int a) { return mesh_.size(a) == 1; }),
                  mesh_axes.end());
  if (mesh_axes.empty()) return result;
  LaidOutTensor out = NewTensor(in.shape, in.dtype, in.layout);
  out.partial_sum_axes = result.partial_sum_axes;
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::ALLREDUCE);
  for (int a : mesh_axes) c->add_mesh_axes(a);
  c->set_reduce_op(op);
  return out;
}

LaidOutTensor ProgramBuilder::AllGather(const LaidOutTensor& in, int mesh_axis,
                                        const std::string& source_op) {
  TensorLayout layout = in.layout;
  auto it = std::find(layout.mesh_axis.begin(), layout.mesh_axis.end(), mesh_axis);
  MESHRT_CHECK(it != layout.mesh_axis.end(), "allgather over an axis that splits nothing");
  const int dim = static_cast<int>(it - layout.mesh_axis.begin());
  *it = kReplicated;
  LaidOutTensor out = NewTensor(in.shape, in.dtype, layout);
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::ALLGATHER);
  c->add_mesh_axes(mesh_axis);
  c->set_concat_axis(dim);
  return out;
}

LaidOutTensor ProgramBuilder::AllToAll(const LaidOutTensor& in, int mesh_axis, int to_dim,
                                       const std::string& source_op) {
  TensorLayout layout = in.layout;
  auto it = std::find(layout.mesh_axis.begin(), layout.mesh_axis.end(), mesh_axis);
  MESHRT_CHECK(it != layout.mesh_axis.end(), "alltoall over an axis that splits nothing");
  MESHRT_CHECK(layout.mesh_axis[to_dim] == kReplicated, "alltoall onto a split dim");
  const int from_dim = static_cast<int>(it - layout.mesh_axis.begin());
  *it = kReplicated;
  layout.mesh_axis[to_dim] = mesh_axis;
  LaidOutTensor out = NewTensor(in.shape, in.dtype, layout);
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::ALLTOALL);
  c->add_mesh_axes(mesh_axis);
  c->set_split_axis(to_dim);
  c->set_concat_axis(from_dim);
  return out;
}

LaidOutTensor ProgramBuilder::LocalSlice(const LaidOutTensor& in, int mesh_axis, int dim,
                                         const std::string& source_op) {
  TensorLayout layout = in.layout;
  MESHRT_CHECK(layout.mesh_axis[dim] == kReplicated, "slicing an already split dim");
  layout.mesh_axis[dim] = mesh_axis;
  LaidOutTensor out = NewTensor(in.shape, in.dtype, layout);
  v1::LocalSlice* s = NewInstruction(out, {in.buffer}, source_op)->mutable_local_slice();
  s->set_mesh_axis(mesh_axis);
  s->set_axis(dim);
  return out;
}

LaidOutTensor ProgramBuilder::ReduceScatter(const LaidOutTensor& in, int mesh_axis, int dim,
                                            const std::string& source_op) {
  TensorLayout layout = in.layout;
  MESHRT_CHECK(layout.mesh_axis[dim] == kReplicated, "reduce-scatter onto a split dim");
  layout.mesh_axis[dim] = mesh_axis;
  LaidOutTensor out = NewTensor(in.shape, in.dtype, layout);
  for (int a : in.partial_sum_axes) {
    if (a != mesh_axis) out.partial_sum_axes.push_back(a);
  }
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::REDUCE_SCATTER);
  c->add_mesh_axes(mesh_axis);
  c->set_reduce_op(v1::REDUCE_SUM);
  c->set_split_axis(dim);
  return out;
}

LaidOutTensor ProgramBuilder::Permute(const LaidOutTensor& in, int mesh_axis, int shift, bool wrap,
                                      const std::string& source_op) {
  MESHRT_CHECK(mesh_axis >= 0 && mesh_axis < mesh_.ndims(), "permute over mesh axis ", mesh_axis);
  MESHRT_CHECK(in.partial_sum_axes.empty(), "permuting a partial sum: ", source_op);
  const int64_t g = mesh_.size(mesh_axis);
  if (shift == 0 || (wrap && shift % g == 0)) return in;
  LaidOutTensor out = NewTensor(in.shape, in.dtype, in.layout);
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::PERMUTE);
  c->add_mesh_axes(mesh_axis);
  c->set_shift(shift);
  c->set_wrap(wrap);
  return out;
}

LaidOutTensor ProgramBuilder::Broadcast(const LaidOutTensor& in, std::vector<int> mesh_axes,
                                        int root, const std::string& source_op) {
  std::sort(mesh_axes.begin(), mesh_axes.end());
  MESHRT_CHECK(root >= 0 && root < mesh_.GroupSize(mesh_axes), "broadcast root ", root);
  MESHRT_CHECK(in.partial_sum_axes.empty(), "broadcasting a partial sum: ", source_op);
  if (mesh_.GroupSize(mesh_axes) == 1) return in;
  LaidOutTensor out = NewTensor(in.shape, in.dtype, in.layout);
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::BROADCAST);
  for (int a : mesh_axes) c->add_mesh_axes(a);
  c->set_root(root);
  return out;
}

void ProgramBuilder::BindOutput(const std::string& name, const LaidOutTensor& t) {
  MESHRT_CHECK(t.partial_sum_axes.empty(), "binding a partial sum as tensor ", name);
  v1::ProgramTensor* out = program_.add_outputs();
  out->set_name(name);
  out->set_buffer(t.buffer);
  *out->mutable_shape() = t.shape.ToProto();
  out->set_dtype(DTypeToProto(t.dtype));
  *out->mutable_layout() = t.layout.ToProto();
}

v1::Program ProgramBuilder::Finish() && { return std::move(program_); }

}  // namespace meshrt
