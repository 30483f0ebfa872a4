// Reshape and rename_dim. A local reshape of slices is right when every split dim is one the
// reshape keeps in step: an input dim and an output dim with the same period (size × row-major
// stride: the extent one index of the dims outside them covers) cut the elements into the same
// contiguous blocks, so splitting one is splitting the other. That covers a dim kept as it is (same
// size and stride), and also the outermost dim of a group the reshape merges ([batch, len] ->
// [tokens] with batch and tokens split alike) or the outermost dim a reshape splits off ([tokens]
// -> [batch, len]) — local, where a gather and a slice would move the whole tensor. So:
//   1. reshard the input so it is split exactly where the output will be split on dims kept in
//      step (this is where a split moves between dims, by alltoall, or is dropped, by allgather);
//   2. reshape locally;
//   3. slice locally to the output's layout (output dims the reshape made new).
// A rename keeps every dim, so it is a pure reshard: the standard way to change a layout.
#include <map>

#include "core/lower_ops.h"
#include "core/status_macros.h"

namespace meshrt {
namespace {

// For each input dim, the output dim it is kept in step with (the same period), or -1. An input
// dim is matched only when its split, if the output's layout splits the matched dim over a mesh
// axis, divides it evenly.
std::vector<int> KeptDims(const Shape& in, const Shape& out, const TensorLayout& out_layout,
                          const Mesh& mesh) {
  const std::vector<int64_t> in_strides = in.Strides(), out_strides = out.Strides();
  std::vector<int> kept(in.rank(), -1);
  std::vector<bool> taken(out.rank(), false);
  for (int i = 0; i < in.rank(); ++i) {
    if (in.dim(i).size <= 1) continue;
    for (int j = 0; j < out.rank(); ++j) {
      if (taken[j] || out.dim(j).size <= 1 ||
          in.dim(i).size * in_strides[i] != out.dim(j).size * out_strides[j]) {
        continue;
      }
      const int axis = out_layout.mesh_axis[j];
      if (axis != kReplicated && in.dim(i).size % mesh.size(axis) != 0) continue;
      kept[i] = j;
      taken[j] = true;
      break;
    }
  }
  return kept;
}

}  // namespace

absl::StatusOr<LaidOutTensor> LowerReshape(LoweringContext& ctx, const v1::Op& op,
                                           const LaidOutTensor& input) {
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout out_layout = ctx.RuleLayout(type.shape);
  const std::vector<int> kept = KeptDims(input.shape, type.shape, out_layout, ctx.mesh());

  TensorLayout in_target{std::vector<int>(input.shape.rank(), kReplicated)};
  TensorLayout local_out{std::vector<int>(type.shape.rank(), kReplicated)};
  for (int i = 0; i < input.shape.rank(); ++i) {
    if (kept[i] < 0) continue;
    in_target.mesh_axis[i] = out_layout.mesh_axis[kept[i]];
    local_out.mesh_axis[kept[i]] = out_layout.mesh_axis[kept[i]];
  }
  ASSIGN_OR_RETURN(LaidOutTensor moved, ctx.builder.Reshard(input, in_target, op.name()));
  ASSIGN_OR_RETURN(LaidOutTensor reshaped,
                   ctx.builder.EmitLocal(op, {moved}, type.shape, type.dtype, local_out));
  return ctx.builder.Reshard(reshaped, out_layout, op.name());
}

}  // namespace meshrt
