// Lowering of shift and halo_exchange, and the two building blocks the conv lowering shares
// (ShiftLaidOut, ExtendWithHalo). See core/ops/ops_spatial.h for the ops.
//
// Shift along a dim split over mesh dim m (g processors, blocks of b, n = g*b): with the offset
// written k = q*b + r (0 <= r < b), output position p*b + j reads x at (p-q)*b + j - r, so output
// block p is the last r positions of block p-q-1 followed by the first b-r of block p-q. Each
// processor cuts its block in two (locally), sends the tail q+1 blocks on and the head q blocks
// on (two permutes along m, zeros arriving past the ends unless wrapping), and concatenates what
// it receives. Every byte crosses the network once; nothing is gathered.
//
// The intermediate tensors (a block's head or tail, a halo-extended block) are given a global
// shape of g times their slice along the split dim. That global shape is bookkeeping only: what
// the program relies on is each processor's slice.
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/ops/lower_ops.h"
#include "core/ops/ops_spatial.h"
#include "util/status_macros.h"

namespace meshrt {
namespace spatial {
namespace {

int64_t PositiveMod(int64_t x, int64_t n) { return ((x % n) + n) % n; }

// floor(a / b) for b > 0.
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Positions [begin, begin+size) of every processor's block of `x` along `dim` (local, no comm).
absl::StatusOr<LaidOutTensor> Piece(LoweringContext& ctx, const LaidOutTensor& x, int dim,
                                    int64_t begin, int64_t size, const std::string& source_op) {
  const int64_t g = ctx.mesh().size(x.layout.mesh_axis[dim]);
  std::vector<Dim> dims = x.shape.dims();
  dims[dim].size = size * g;
  return ctx.builder.EmitLocal(DimRangeOp(source_op, x.shape.dim(dim).name, begin, size), {x},
                               Shape(std::move(dims)), x.dtype, x.layout);
}

}  // namespace

absl::StatusOr<LaidOutTensor> ShiftLaidOut(LoweringContext& ctx, const LaidOutTensor& x, int dim,
                                           int64_t offset, bool wrap,
                                           const std::string& source_op) {
  const std::string& name = x.shape.dim(dim).name;
  const int m = x.layout.mesh_axis[dim];
  const int64_t n = x.shape.dim(dim).size;
  if (wrap) offset = PositiveMod(offset, n);
  if (m == kReplicated || ctx.mesh().size(m) == 1 || std::llabs(offset) >= n) {
    // Whole dim on every processor, or (zero fill) nothing survives: a local shift is exact.
    return ctx.builder.EmitLocal(ShiftOp(source_op, name, offset, wrap), {x}, x.shape, x.dtype,
                                 x.layout);
  }
  if (offset == 0) return x;
  const int64_t g = ctx.mesh().size(m), b = n / g;
  const int64_t q = FloorDiv(offset, b), r = offset - q * b;
  if (r == 0) return ctx.builder.Permute(x, m, static_cast<int>(q), wrap, source_op);
  ASSIGN_OR_RETURN(const LaidOutTensor tail_piece, Piece(ctx, x, dim, b - r, r, source_op));
  ASSIGN_OR_RETURN(const LaidOutTensor tail,
                   ctx.builder.Permute(tail_piece, m, static_cast<int>(q + 1), wrap, source_op));
  ASSIGN_OR_RETURN(const LaidOutTensor head_piece, Piece(ctx, x, dim, 0, b - r, source_op));
  ASSIGN_OR_RETURN(const LaidOutTensor head,
                   ctx.builder.Permute(head_piece, m, static_cast<int>(q), wrap, source_op));
  return ctx.builder.EmitLocal(DimConcatOp(source_op, name), {tail, head}, x.shape, x.dtype,
                               x.layout);
}

absl::StatusOr<LaidOutTensor> ExtendWithHalo(LoweringContext& ctx, const LaidOutTensor& x, int dim,
                                             int64_t before, int64_t after, bool wrap,
                                             const std::string& source_op) {
  if (dim < 0 || dim >= x.shape.rank() || x.layout.mesh_axis[dim] == kReplicated) {
    return absl::InternalError(absl::StrCat("lowering op '", source_op, "': a halo along dim ", dim,
                                            " of ", x.shape.ToString(),
                                            ", which is not split (a lowering bug)"));
  }
  const int m = x.layout.mesh_axis[dim];
  const int64_t g = ctx.mesh().size(m), b = x.shape.dim(dim).size / g;
  if (before < 0 || after < 0 || before > b || after > b) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op '", source_op, "': a halo of ", before, " before and ", after, " after along dim '",
        x.shape.dim(dim).name, "' is larger than the block of ", b,
        " each processor holds; split that dim over fewer processors or use a smaller window"));
  }
  std::vector<LaidOutTensor> parts;
  if (before > 0) {
    ASSIGN_OR_RETURN(const LaidOutTensor piece, Piece(ctx, x, dim, b - before, before, source_op));
    ASSIGN_OR_RETURN(LaidOutTensor halo, ctx.builder.Permute(piece, m, 1, wrap, source_op));
    parts.push_back(std::move(halo));
  }
  parts.push_back(x);
  if (after > 0) {
    ASSIGN_OR_RETURN(const LaidOutTensor piece, Piece(ctx, x, dim, 0, after, source_op));
    ASSIGN_OR_RETURN(LaidOutTensor halo, ctx.builder.Permute(piece, m, -1, wrap, source_op));
    parts.push_back(std::move(halo));
  }
  if (parts.size() == 1) return x;
  std::vector<Dim> dims = x.shape.dims();
  dims[dim].size = (b + before + after) * g;
  return ctx.builder.EmitLocal(DimConcatOp(source_op, x.shape.dim(dim).name), parts,
                               Shape(std::move(dims)), x.dtype, x.layout);
}

absl::StatusOr<LaidOutTensor> LowerShift(LoweringContext& ctx, const v1::Op& op,
                                         const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& x = inputs[0];
  const int dim = x.shape.IndexOf(op.dims(0));
  return ShiftLaidOut(ctx, x, dim, IntAttrOr(op, "offset", 0), BoolAttrOr(op, "wrap", false),
                      op.name());
}

// The block dim is made whole first (positions move between blocks only through blocks_dim).
// Blocks dim whole: the kernel runs locally. Split: each block's first and last `halo` positions
// are cut out, shifted by one block (ShiftLaidOut: one permute when a processor holds one block,
// else a local part and a permute of the edge block), and concatenated around the block.
absl::StatusOr<LaidOutTensor> LowerHaloExchange(LoweringContext& ctx, const v1::Op& op,
                                                const std::vector<LaidOutTensor>& inputs) {
  const TensorType& type = ctx.graph.type(op.name());
  const int ib = inputs[0].shape.IndexOf(op.dims(0));
  const int ik = inputs[0].shape.IndexOf(op.dims(1));
  TensorLayout whole_block = inputs[0].layout;
  whole_block.mesh_axis[ik] = kReplicated;
  ASSIGN_OR_RETURN(const LaidOutTensor x, ctx.builder.Reshard(inputs[0], whole_block, op.name()));
  const int64_t halo = IntAttrOr(op, "halo", 0);
  const bool wrap = BoolAttrOr(op, "wrap", false);
  const int m = x.layout.mesh_axis[ib];
  LaidOutTensor y;
  if (m == kReplicated || ctx.mesh().size(m) == 1 || halo == 0) {
    ASSIGN_OR_RETURN(y, ctx.builder.EmitLocal(op, {x}, type.shape, type.dtype, x.layout));
  } else {
    const int64_t b = x.shape.dim(ik).size;
    if (halo < 0 || halo > b) {
      return OpError(op, absl::StrCat("halo ", halo, " must be in [0, ", b, "] (the size of '",
                                      op.dims(1), "')"));
    }
    auto edge = [&](int64_t begin) {
      std::vector<Dim> dims = x.shape.dims();
      dims[ik].size = halo;
      return ctx.builder.EmitLocal(DimRangeOp(op.name(), op.dims(1), begin, halo), {x},
                                   Shape(std::move(dims)), x.dtype, x.layout);
    };
    ASSIGN_OR_RETURN(const LaidOutTensor left_edge, edge(b - halo));
    ASSIGN_OR_RETURN(const LaidOutTensor left,
                     ShiftLaidOut(ctx, left_edge, ib, 1, wrap, op.name()));
    ASSIGN_OR_RETURN(const LaidOutTensor right_edge, edge(0));
    ASSIGN_OR_RETURN(const LaidOutTensor right,
                     ShiftLaidOut(ctx, right_edge, ib, -1, wrap, op.name()));
    ASSIGN_OR_RETURN(y, ctx.builder.EmitLocal(DimConcatOp(op.name(), op.dims(1)), {left, x, right},
                                              type.shape, type.dtype, x.layout));
  }
  return ctx.builder.Reshard(y, ctx.RuleLayout(type.shape), op.name());
}

}  // namespace spatial
}  // namespace meshrt
