// Reshape and rename_dim. A local reshape of slices is right when every split dim is one the
// reshape keeps in step: an input dim and an output dim with the same period (size × row-major
// stride: the extent one index of the dims outside them covers) cut the elements into the same
// contiguous blocks, so splitting one is splitting the other. That covers a dim kept as it is (same
// size and stride), and also the outermost dim of a group the reshape merges ([batch, len] ->
// [tokens] with batch and tokens split alike) or the outermost dim a reshape splits off ([tokens]
// -> [batch, len], or d_model -> [heads, d_kv] with heads split) — local, where a gather and a
// slice would move the whole tensor. So:
//   1. reshard the input so that only dims kept in step are split (this is where a split on an
//      inner dim of a merged group moves to the group's outermost dim, by alltoall, or is dropped,
//      by allgather);
//   2. reshape locally;
//   3. reshard the output to its layout (local slices of the dims the reshape made, or the moves a
//      split carried through the reshape still needs).
// Which mesh axis a kept pair carries through the reshape is a cost choice: the one the output
// wants (the layout change then happens before the reshape) or the one the input has (after it).
// They differ when the layout change is cheaper on one side: [a:4, b:6] -> [x:2, y:2, z:6] with a
// split and y wanted split carries a's split to x and moves it to y by one alltoall of half the
// tensor, where moving it before the reshape would gather a whole. We take the cheapest by the
// bytes each worker sends (ProgramBuilder::PlanReshard), the output's axes on a tie.
// A rename keeps every dim, so it is a pure reshard: the standard way to change a layout.
#include <algorithm>
#include <optional>

#include "core/ops/lower_ops.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// For each input dim, the output dim it is kept in step with (the same period), or -1.
std::vector<int> KeptDims(const Shape& in, const Shape& out) {
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
      kept[i] = j;
      taken[j] = true;
      break;
    }
  }
  return kept;
}

// The layouts either side of the local reshape: the input resharded to `in_target`, reshaped into
// `local_out`, which is then resharded to the output's layout.
struct Carry {
  TensorLayout in_target, local_out;
};

}  // namespace

absl::StatusOr<LaidOutTensor> LowerReshape(LoweringContext& ctx, const v1::Op& op,
                                           const LaidOutTensor& input) {
  const TensorType& type = ctx.graph.type(op.name());
  const TensorLayout out_layout = ctx.RuleLayout(type.shape);
  const Mesh& mesh = ctx.mesh();
  const std::vector<int> kept = KeptDims(input.shape, type.shape);

  // Per kept pair (i, kept[i]), the mesh axes it may carry through the reshape: first the
  // output's (none if it cannot split the input dim evenly), then the input's where that differs
  // and splits both dims evenly. Only input dims split over an axis can offer a second choice, so
  // there are at most 2^(mesh dims) combinations.
  auto carriable = [&](int i, int axis) {
    if (axis == kReplicated) return true;
    const int64_t g = mesh.size(axis);
    return input.shape.dim(i).size % g == 0 && type.shape.dim(kept[i]).size % g == 0;
  };
  const int rank = input.shape.rank();
  std::vector<std::vector<int>> options(rank);
  std::vector<int> choice_bit(rank, -1);  // the bit of the combination choosing option 1
  int choices = 0;
  for (int i = 0; i < rank; ++i) {
    if (kept[i] < 0) continue;
    const int wanted = out_layout.mesh_axis[kept[i]], had = input.layout.mesh_axis[i];
    options[i].push_back(carriable(i, wanted) ? wanted : kReplicated);
    if (had != options[i][0] && carriable(i, had)) {
      options[i].push_back(had);
      choice_bit[i] = choices++;
    }
  }

  std::optional<Carry> best;
  int64_t best_sent = 0;
  for (uint64_t combination = 0; combination < (uint64_t{1} << choices); ++combination) {
    Carry c{TensorLayout{std::vector<int>(rank, kReplicated)},
            TensorLayout{std::vector<int>(type.shape.rank(), kReplicated)}};
    for (int i = 0; i < rank; ++i) {
      if (kept[i] < 0) continue;
      const int pick = choice_bit[i] < 0 ? 0 : static_cast<int>((combination >> choice_bit[i]) & 1);
      c.in_target.mesh_axis[i] = options[i][pick];
      c.local_out.mesh_axis[kept[i]] = options[i][pick];
    }
    if (!CheckLayout(input.shape, c.in_target, mesh, "", "").ok()) continue;  // an axis twice
    ASSIGN_OR_RETURN(ReshardPlan before, ctx.builder.PlanReshard(input, c.in_target, op.name()));
    const LaidOutTensor reshaped{-1, type.shape, type.dtype, c.local_out, {}};
    ASSIGN_OR_RETURN(ReshardPlan after, ctx.builder.PlanReshard(reshaped, out_layout, op.name()));
    const int64_t sent = before.sent_bytes + after.sent_bytes;
    if (!best || sent < best_sent) {
      best = c;
      best_sent = sent;
    }
  }
  if (!best) return LoweringBug(op, "no layout to reshape the input's slices in");
  ASSIGN_OR_RETURN(LaidOutTensor moved, ctx.builder.Reshard(input, best->in_target, op.name()));
  ASSIGN_OR_RETURN(LaidOutTensor reshaped,
                   ctx.builder.EmitLocal(op, {moved}, type.shape, type.dtype, best->local_out));
  return ctx.builder.Reshard(reshaped, out_layout, op.name());
}

}  // namespace meshrt
