#include "runtime/decoded_instruction.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/communicator.h"

namespace meshrt {
namespace {

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

absl::Status ParseTypeAndShape(const v1::Instruction& instr, DecodedInstruction* d) {
  auto dtype = DTypeFromProto(instr.dtype());
  if (!dtype.ok()) return Invalid(std::string(dtype.status().message()));
  d->dtype = *dtype;
  auto shape = Shape::FromProto(instr.slice_shape(), "slice_shape");
  if (!shape.ok()) return shape.status();
  d->slice_shape = *std::move(shape);
  return absl::OkStatus();
}

// The op with `_slice_begin` and `_global_sizes`: where this processor's slice sits in the whole
// tensor, for kernels that compute values from global positions (e.g. random numbers).
absl::Status PrepareSliceBegin(const v1::Instruction& instr, const Mesh& mesh,
                               const std::vector<int64_t>& coordinate, DecodedInstruction* d) {
  auto global = Shape::FromProto(instr.global_shape(), "global_shape");
  if (!global.ok()) return global.status();
  const TensorLayout layout = TensorLayout::FromProto(instr.layout());
  if (static_cast<int>(layout.mesh_axis.size()) != global->rank()) {
    return Invalid("the instruction's layout does not match its global shape");
  }
  for (int a : layout.mesh_axis) {
    if (a != kReplicated && (a < 0 || a >= mesh.ndims())) {
      return Invalid(absl::StrCat("the instruction's layout names mesh axis ", a, " but mesh ",
                                  mesh.ToString(), " has ", mesh.ndims(), " dims"));
    }
  }
  v1::Op op = instr.local();
  v1::IntList* begin = (*op.mutable_attrs())["_slice_begin"].mutable_ints();
  for (int64_t b : SliceBegin(*global, layout, mesh, coordinate)) begin->add_values(b);
  v1::IntList* sizes = (*op.mutable_attrs())["_global_sizes"].mutable_ints();
  for (const Dim& dim : global->dims()) sizes->add_values(dim.size);
  d->prepared = std::move(op);
  return absl::OkStatus();
}

}  // namespace

DecodedInstruction DecodeInstruction(const v1::Instruction& instr, const Mesh& mesh,
                                     const std::vector<int64_t>& coordinate) {
  DecodedInstruction d;
  d.parse_status = ParseTypeAndShape(instr, &d);
  if (instr.kind_case() == v1::Instruction::kLocal) {
    d.op_info = FindOp(instr.local().type());
    if (d.op_info != nullptr && d.op_info->needs_slice_begin && instr.has_global_shape()) {
      d.prepared_status = PrepareSliceBegin(instr, mesh, coordinate, &d);
    }
  } else if (instr.kind_case() == v1::Instruction::kCollective) {
    const v1::Collective& c = instr.collective();
    d.axes_status = NormalizeMeshAxes(mesh, "collective",
                                      {c.mesh_axes().begin(), c.mesh_axes().end()}, &d.axes);
    if (d.axes_status.ok()) d.group_size = mesh.GroupSize(d.axes);
  }
  return d;
}

}  // namespace meshrt
