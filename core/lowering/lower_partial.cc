// Lazy partial sums (Mesh-TensorFlow's LazyAllreduceSum). An einsum or reduce_sum over a split
// dim leaves every processor a partial sum over the mesh axes of that dim: the tensor is the sum
// of the buffers of the processors that differ only along those axes. An op f linear in its
// partial inputs can run on the buffers themselves — sum(f(p_i)) = f(sum(p_i)) — so the sum is
// resolved once, after f, instead of once per input (three attention input-gradient allreduces
// become one). That holds when
//   - f is linear in every partial input, as its record says (OpInfo::linear, next to the op's
//     registration): add/sub of two partial sums, neg, scale, mul or div by a tensor that is not
//     one (or by a scalar), where(c, a, b) of two (or where(c, a, 0)), a cast that keeps the
//     dtype, reduce_sum/mean, reshape/rename_dim/replace_dims;
//   - the partial inputs share their partial axes, and every other input is the same on the
//     processors summed over (no dim of it is split over those axes);
//   - f is the partial inputs' only reader (otherwise they are resolved for another reader anyway,
//     and resolving f's output too would add traffic);
//   - f's output slice is no larger than its partial inputs' together (mul by a tensor with more
//     dims would make the later resolve move more bytes than resolving first).
// f is then lowered by its family's code with the partial axes left out of every rule layout:
// on each slab of processors with one coordinate along those axes the program is an ordinary
// lowering of f on that slab's partial tensor; collectives over the other axes stay inside a slab.
#include <algorithm>

#include "core/ops/lower_ops.h"
#include "core/ops/ops_math.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

bool IsPartial(const LaidOutTensor& t) { return !t.partial_sum_axes.empty(); }

TensorLayout Without(TensorLayout layout, const std::vector<int>& axes) {
  for (int& a : layout.mesh_axis) {
    if (std::find(axes.begin(), axes.end(), a) != axes.end()) a = kReplicated;
  }
  return layout;
}

// Whether `op` is linear in the inputs marked in `partial` (at least one is): a fact of the op's
// record (OpInfo::linear).
bool LinearIn(const OpInfo& info, const v1::Op& op, const std::vector<bool>& partial,
              const std::vector<LaidOutTensor>& inputs, DType out_dtype) {
  if (info.linear == nullptr) return false;
  std::vector<DType> dtypes;
  dtypes.reserve(inputs.size());
  for (const LaidOutTensor& t : inputs) dtypes.push_back(t.dtype);
  return info.linear(op, partial, dtypes, out_dtype);
}

}  // namespace

void DropUnitPartialAxes(const LoweringContext& ctx, LaidOutTensor* t) {
  std::vector<int> axes = t->partial_sum_axes;
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  t->partial_sum_axes.clear();
  const TensorLayout rule = ctx.rules.LayoutFor(t->shape);
  for (int a : axes) {
    if (ctx.mesh().size(a) > 1) {
      t->partial_sum_axes.push_back(a);
      continue;
    }
    for (size_t d = 0; d < rule.mesh_axis.size() && d < t->layout.mesh_axis.size(); ++d) {
      if (rule.mesh_axis[d] == a && t->layout.mesh_axis[d] == kReplicated) {
        t->layout.mesh_axis[d] = a;
      }
    }
  }
}

absl::StatusOr<std::optional<LaidOutTensor>> LowerOnPartials(
    LoweringContext& ctx, const v1::Op& op, const std::vector<LaidOutTensor>& inputs) {
  const OpInfo* info = FindOp(op.type());
  if (info == nullptr || info->linear == nullptr || ctx.readers == nullptr ||
      static_cast<int>(inputs.size()) != op.inputs_size()) {
    return std::nullopt;
  }
  std::vector<int> axes;
  std::vector<bool> partial(inputs.size(), false);
  int64_t partial_elements = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const LaidOutTensor& in = inputs[i];
    if (!IsPartial(in)) continue;
    if (axes.empty()) axes = in.partial_sum_axes;
    if (in.partial_sum_axes != axes) return std::nullopt;
    auto r = ctx.readers->find(op.inputs(static_cast<int>(i)));
    if (r == ctx.readers->end() || r->second != 1) return std::nullopt;
    // The invariant LowerOp keeps: a partial sum is in its rule layout less its partial axes.
    if (in.layout != Without(ctx.rules.LayoutFor(in.shape), axes)) return std::nullopt;
    partial[i] = true;
    partial_elements += SliceShape(in.shape, in.layout, ctx.mesh()).num_elements();
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (partial[i]) continue;
    for (int a : inputs[i].layout.mesh_axis) {
      if (std::find(axes.begin(), axes.end(), a) != axes.end()) return std::nullopt;
    }
  }
  const TensorType& type = ctx.graph.type(op.name());
  if (!LinearIn(*info, op, partial, inputs, type.dtype)) return std::nullopt;
  LoweringContext slab = ctx;
  slab.partial_axes = axes;
  if (SliceShape(type.shape, slab.RuleLayout(type.shape), ctx.mesh()).num_elements() >
      partial_elements) {
    return std::nullopt;
  }
  std::vector<LaidOutTensor> buffers = inputs;
  for (LaidOutTensor& in : buffers) in.partial_sum_axes.clear();
  ASSIGN_OR_RETURN(LaidOutTensor out, LowerByFamily(slab, op, buffers));
  out.partial_sum_axes.insert(out.partial_sum_axes.end(), axes.begin(), axes.end());
  DropUnitPartialAxes(ctx, &out);
  if (ctx.read_partial != nullptr) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (partial[i]) ctx.read_partial->insert(inputs[i].buffer);
    }
  }
  return std::optional<LaidOutTensor>(std::move(out));
}

}  // namespace meshrt
