// Reshape and rename_dim. A local reshape of slices is right when every split dim is one the
// reshape keeps intact: an input dim and an output dim with the same size and the same row-major
// stride cover the same elements, so splitting one is splitting the other. So:
//   1. reshard the input so it is split exactly where the output will be split on kept dims (this
//      is where a split moves between dims, by alltoall, or is dropped, by allgather);
//   2. reshape locally;
//   3. slice locally to the output's layout (output dims the reshape made new).
// A rename keeps every dim, so it is a pure reshard: the standard way to change a layout.
#include <map>

#include "core/lower_ops.h"
#include "core/status_macros.h"

namespace meshrt {
namespace {

// For each input dim, the output dim it is kept as, or -1.
std::vector<int> KeptDims(const Shape& in, const Shape& out) {
  const std::vector<int64_t> in_strides = in.Strides(), out_strides = out.Strides();
  std::vector<int> kept(in.rank(), -1);
  for (int i = 0; i < in.rank(); ++i) {
    for (int j = 0; j < out.rank(); ++j) {
      if (in.dim(i).size == out.dim(j).size && in_strides[i] == out_strides[j] &&
          in.dim(i).size > 1) {
        kept[i] = j;
        break;
      }
    }
  }
  return kept;
}

}  // namespace

absl::StatusOr<LaidOutTensor> LowerReshape(LoweringContext& ctx, const v1::Op& op,
                                           const LaidOutTensor& input) {
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout out_layout = ctx.RuleLayout(type.shape);
  const std::vector<int> kept = KeptDims(input.shape, type.shape);

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
