#include "core/ir/program_builder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/status_macros.h"

namespace meshrt {

ProgramBuilder::ProgramBuilder(Mesh mesh, const LayoutRules& rules, google::protobuf::Arena* arena)
    : mesh_(std::move(mesh)),
      owned_(arena == nullptr ? std::make_unique<v1::Program>() : nullptr),
      program_(arena == nullptr ? *owned_
                                : *google::protobuf::Arena::CreateMessage<v1::Program>(arena)) {
  *program_.mutable_mesh() = mesh_.ToProto();
  *program_.mutable_rules() = rules.ToProto();
}

absl::Status ProgramBuilder::Broken(absl::string_view source_op, absl::string_view what) {
  return absl::InternalError(
      absl::StrCat("lowering op '", source_op, "': ", what, " (a lowering bug)"));
}

absl::Status ProgramBuilder::CheckAxis(int axis, const std::string& source_op) const {
  if (axis >= 0 && axis < mesh_.ndims()) return absl::OkStatus();
  return Broken(source_op, absl::StrCat("mesh axis ", axis, " is not in mesh ", mesh_.ToString()));
}

std::string ProgramBuilder::Described(const Shape& shape, const TensorLayout& layout) const {
  bool fits = static_cast<int>(layout.mesh_axis.size()) == shape.rank();
  for (int a : layout.mesh_axis) fits = fits && a >= kReplicated && a < mesh_.ndims();
  if (fits) return layout.ToString(shape, mesh_);
  return absl::StrCat(shape.ToString(), " in layout [", absl::StrJoin(layout.mesh_axis, ","), "]");
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::NewTensor(const Shape& shape, DType dtype,
                                                        const TensorLayout& layout,
                                                        const std::string& source_op) {
  if (static_cast<int>(layout.mesh_axis.size()) != shape.rank()) {
    return Broken(source_op, absl::StrCat("a layout of rank ", layout.mesh_axis.size(),
                                          " for a tensor of rank ", shape.rank(), ": ",
                                          Described(shape, layout)));
  }
  for (int a : layout.mesh_axis) {
    if (a != kReplicated) RETURN_IF_ERROR(CheckAxis(a, source_op));
  }
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

absl::StatusOr<LaidOutTensor> ProgramBuilder::AddInput(const std::string& name, const Shape& shape,
                                                       DType dtype, const TensorLayout& layout) {
  ASSIGN_OR_RETURN(LaidOutTensor t, NewTensor(shape, dtype, layout, name));
  v1::ProgramTensor* in = program_.add_inputs();
  in->set_name(name);
  in->set_buffer(t.buffer);
  *in->mutable_shape() = shape.ToProto();
  in->set_dtype(DTypeToProto(dtype));
  *in->mutable_layout() = layout.ToProto();
  return t;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::EmitLocal(const v1::Op& op,
                                                        const std::vector<LaidOutTensor>& inputs,
                                                        const Shape& shape, DType dtype,
                                                        const TensorLayout& layout) {
  std::vector<int> buffers;
  for (const LaidOutTensor& in : inputs) {
    if (!in.partial_sum_axes.empty()) {
      return Broken(op.name(), absl::StrCat("local op ", op.type(), " reads a partial sum ",
                                            in.shape.ToString()));
    }
    buffers.push_back(in.buffer);
  }
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(shape, dtype, layout, op.name()));
  v1::Instruction* inst = NewInstruction(out, buffers, op.name());
  v1::Op* local = inst->mutable_local();
  *local = op;
  local->clear_inputs();
  // Shape-carrying ops state the slice shape, so a local op reads as the kernel runs it.
  if (op.has_shape()) *local->mutable_shape() = inst->slice_shape();
  return out;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::AddVariable(const v1::Op& op, const Shape& shape,
                                                          DType dtype, const TensorLayout& layout,
                                                          std::vector<int> partial_sum_axes) {
  ASSIGN_OR_RETURN(LaidOutTensor t, NewTensor(shape, dtype, layout, op.name()));
  std::sort(partial_sum_axes.begin(), partial_sum_axes.end());
  for (int a : partial_sum_axes) {
    RETURN_IF_ERROR(CheckAxis(a, op.name()));
    if (std::find(layout.mesh_axis.begin(), layout.mesh_axis.end(), a) != layout.mesh_axis.end()) {
      return Broken(op.name(), absl::StrCat("variable partial over mesh axis ", a, ", which splits ",
                                            Described(shape, layout)));
    }
  }
  t.partial_sum_axes = partial_sum_axes;
  v1::ProgramVariable* var = program_.add_variables();
  var->set_name(op.name());
  var->set_buffer(t.buffer);
  *var->mutable_shape() = shape.ToProto();
  var->set_dtype(DTypeToProto(dtype));
  *var->mutable_layout() = layout.ToProto();
  var->set_update_buffer(-1);
  for (int a : partial_sum_axes) var->add_partial_sum_axes(a);
  // The initializer is an instruction like any local op, kept aside: the executor runs it only
  // when the processor has no slice of the variable yet.
  v1::Instruction* inst = NewInstruction(t, {}, op.name());
  *inst->mutable_local() = op;
  *inst->mutable_local()->mutable_shape() = inst->slice_shape();
  *var->mutable_initializer() = *inst;
  program_.mutable_instructions()->RemoveLast();
  return t;
}

absl::Status ProgramBuilder::SetVariableUpdate(const std::string& name,
                                               const LaidOutTensor& value) {
  for (v1::ProgramVariable& var : *program_.mutable_variables()) {
    if (var.name() != name) continue;
    std::vector<int> axes = value.partial_sum_axes;
    std::sort(axes.begin(), axes.end());
    if (axes != std::vector<int>(var.partial_sum_axes().begin(), var.partial_sum_axes().end())) {
      return Broken(name, absl::StrCat("variable '", name, "' (partial over mesh axes [",
                                       absl::StrJoin(var.partial_sum_axes(), ","),
                                       "]) assigned a value partial over [",
                                       absl::StrJoin(axes, ","), "]"));
    }
    const TensorLayout have = TensorLayout::FromProto(var.layout());
    if (have != value.layout) {
      return Broken(
          name, absl::StrCat("variable '", name, "' laid out ", Described(value.shape, have),
                             " assigned a value laid out ", Described(value.shape, value.layout)));
    }
    var.set_update_buffer(value.buffer);
    return absl::OkStatus();
  }
  return Broken(name, absl::StrCat("no program variable '", name, "'"));
}

absl::Status ProgramBuilder::Guard(int first, const LaidOutTensor& predicate,
                                   const std::string& source_op) {
  if (predicate.shape.rank() != 0 || !predicate.partial_sum_axes.empty() || predicate.buffer < 0 ||
      predicate.buffer >= program_.num_buffers()) {
    return Broken(source_op, absl::StrCat("guarded by ", predicate.shape.ToString(),
                                          predicate.partial_sum_axes.empty() ? "" : " (partial)",
                                          " in buffer ", predicate.buffer,
                                          ", not a replicated scalar"));
  }
  if (first < 0 || first > program_.instructions_size()) {
    return Broken(source_op, absl::StrCat("guarding from instruction ", first, " of ",
                                          program_.instructions_size()));
  }
  for (int i = first; i < program_.instructions_size(); ++i) {
    program_.mutable_instructions(i)->set_predicate(predicate.buffer);
  }
  return absl::OkStatus();
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::AddPartials(const LaidOutTensor& a,
                                                          const LaidOutTensor& b,
                                                          const std::string& source_op) {
  if (a.layout != b.layout || a.partial_sum_axes != b.partial_sum_axes || a.shape != b.shape ||
      a.dtype != b.dtype) {
    return Broken(source_op,
                  absl::StrCat("adding unlike partial sums ", Described(a.shape, a.layout), " and ",
                               Described(b.shape, b.layout)));
  }
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(a.shape, a.dtype, a.layout, source_op));
  out.partial_sum_axes = a.partial_sum_axes;
  v1::Op* add = NewInstruction(out, {a.buffer, b.buffer}, source_op)->mutable_local();
  add->set_name(source_op);
  add->set_type("add");
  return out;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::AllReduce(const LaidOutTensor& in,
                                                        std::vector<int> mesh_axes, v1::ReduceOp op,
                                                        const std::string& source_op) {
  for (int a : mesh_axes) RETURN_IF_ERROR(CheckAxis(a, source_op));
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
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(in.shape, in.dtype, in.layout, source_op));
  out.partial_sum_axes = result.partial_sum_axes;
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::ALLREDUCE);
  for (int a : mesh_axes) c->add_mesh_axes(a);
  c->set_reduce_op(op);
  return out;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::AllGather(const LaidOutTensor& in, int mesh_axis,
                                                        const std::string& source_op) {
  TensorLayout layout = in.layout;
  auto it = std::find(layout.mesh_axis.begin(), layout.mesh_axis.end(), mesh_axis);
  if (it == layout.mesh_axis.end()) {
    return Broken(source_op,
                  absl::StrCat("allgather over mesh axis ", mesh_axis, ", which splits no dim of ",
                               Described(in.shape, in.layout)));
  }
  const int dim = static_cast<int>(it - layout.mesh_axis.begin());
  *it = kReplicated;
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(in.shape, in.dtype, layout, source_op));
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::ALLGATHER);
  c->add_mesh_axes(mesh_axis);
  c->set_concat_axis(dim);
  return out;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::AllToAll(const LaidOutTensor& in, int mesh_axis,
                                                       int to_dim, const std::string& source_op) {
  TensorLayout layout = in.layout;
  auto it = std::find(layout.mesh_axis.begin(), layout.mesh_axis.end(), mesh_axis);
  if (it == layout.mesh_axis.end()) {
    return Broken(source_op,
                  absl::StrCat("alltoall over mesh axis ", mesh_axis, ", which splits no dim of ",
                               Described(in.shape, in.layout)));
  }
  if (to_dim < 0 || to_dim >= in.shape.rank() || layout.mesh_axis[to_dim] != kReplicated) {
    return Broken(source_op,
                  absl::StrCat("alltoall onto dim ", to_dim, " of ", Described(in.shape, in.layout),
                               ", which is not a whole dim"));
  }
  const int from_dim = static_cast<int>(it - layout.mesh_axis.begin());
  *it = kReplicated;
  layout.mesh_axis[to_dim] = mesh_axis;
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(in.shape, in.dtype, layout, source_op));
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::ALLTOALL);
  c->add_mesh_axes(mesh_axis);
  c->set_split_axis(to_dim);
  c->set_concat_axis(from_dim);
  return out;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::LocalSlice(const LaidOutTensor& in, int mesh_axis,
                                                         int dim, const std::string& source_op) {
  TensorLayout layout = in.layout;
  if (dim < 0 || dim >= in.shape.rank() || layout.mesh_axis[dim] != kReplicated) {
    return Broken(source_op,
                  absl::StrCat("local slice of dim ", dim, " of ", Described(in.shape, in.layout),
                               ", which is not a whole dim"));
  }
  layout.mesh_axis[dim] = mesh_axis;
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(in.shape, in.dtype, layout, source_op));
  v1::LocalSlice* s = NewInstruction(out, {in.buffer}, source_op)->mutable_local_slice();
  s->set_mesh_axis(mesh_axis);
  s->set_axis(dim);
  return out;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::ReduceScatter(const LaidOutTensor& in, int mesh_axis,
                                                            int dim, const std::string& source_op) {
  TensorLayout layout = in.layout;
  if (dim < 0 || dim >= in.shape.rank() || layout.mesh_axis[dim] != kReplicated) {
    return Broken(source_op,
                  absl::StrCat("reduce-scatter onto dim ", dim, " of ",
                               Described(in.shape, in.layout), ", which is not a whole dim"));
  }
  layout.mesh_axis[dim] = mesh_axis;
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(in.shape, in.dtype, layout, source_op));
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

absl::StatusOr<LaidOutTensor> ProgramBuilder::Permute(const LaidOutTensor& in, int mesh_axis,
                                                      int shift, bool wrap,
                                                      const std::string& source_op) {
  RETURN_IF_ERROR(CheckAxis(mesh_axis, source_op));
  if (!in.partial_sum_axes.empty()) {
    return Broken(source_op, absl::StrCat("permuting a partial sum ", in.shape.ToString()));
  }
  const int64_t g = mesh_.size(mesh_axis);
  if (shift == 0 || (wrap && shift % g == 0)) return in;
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(in.shape, in.dtype, in.layout, source_op));
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::PERMUTE);
  c->add_mesh_axes(mesh_axis);
  c->set_shift(shift);
  c->set_wrap(wrap);
  return out;
}

absl::StatusOr<LaidOutTensor> ProgramBuilder::Broadcast(const LaidOutTensor& in,
                                                        std::vector<int> mesh_axes, int root,
                                                        const std::string& source_op) {
  for (int a : mesh_axes) RETURN_IF_ERROR(CheckAxis(a, source_op));
  std::sort(mesh_axes.begin(), mesh_axes.end());
  const int group = mesh_.GroupSize(mesh_axes);
  if (root < 0 || root >= group) {
    return Broken(source_op, absl::StrCat("broadcast from root ", root, " in a group of ", group));
  }
  if (!in.partial_sum_axes.empty()) {
    return Broken(source_op, absl::StrCat("broadcasting a partial sum ", in.shape.ToString()));
  }
  if (group == 1) return in;
  ASSIGN_OR_RETURN(LaidOutTensor out, NewTensor(in.shape, in.dtype, in.layout, source_op));
  v1::Collective* c = NewInstruction(out, {in.buffer}, source_op)->mutable_collective();
  c->set_kind(v1::Collective::BROADCAST);
  for (int a : mesh_axes) c->add_mesh_axes(a);
  c->set_root(root);
  return out;
}

absl::Status ProgramBuilder::BindOutput(const std::string& name, const LaidOutTensor& t,
                                        bool resolved_on_fetch) {
  if (!t.partial_sum_axes.empty()) {
    return Broken(name, absl::StrCat("binding a partial sum as tensor '", name, "'"));
  }
  v1::ProgramTensor* out = program_.add_outputs();
  out->set_name(name);
  out->set_buffer(t.buffer);
  *out->mutable_shape() = t.shape.ToProto();
  out->set_dtype(DTypeToProto(t.dtype));
  *out->mutable_layout() = t.layout.ToProto();
  out->set_resolved_on_fetch(resolved_on_fetch);
  return absl::OkStatus();
}

absl::Status ProgramBuilder::MarkResolvedOnFetch(const std::string& name) {
  for (v1::ProgramTensor& out : *program_.mutable_outputs()) {
    if (out.name() != name) continue;
    out.set_resolved_on_fetch(true);
    return absl::OkStatus();
  }
  return Broken(name, absl::StrCat("no program output '", name, "' to mark resolved on fetch"));
}

v1::Program ProgramBuilder::Finish() && { return std::move(program_); }

v1::Program* ProgramBuilder::FinishOnArena() && { return &program_; }

}  // namespace meshrt
