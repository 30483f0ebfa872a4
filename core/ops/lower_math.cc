// Lowering of reduce_logsumexp, softmax, log_softmax, layer_norm, rms_norm, softmax_cross_entropy
// and the fused gradients softmax_grad, layer_norm_grad, rms_norm_grad.
//
// When no normalised (reduced) dim is split over a mesh dim of size > 1, each is one local op:
// every processor holds whole rows. Otherwise each is built from local elementwise ops and
// reductions on the slices plus allreduces over the mesh dims that split normalised dims — the
// whole dim is never gathered. The pieces (all float32; shapes by name, so every piece's rule
// layout agrees with x's):
//
//   logsumexp(x)  m = allreduce_max(local max x); s = allreduce_sum(local sum exp(x - m));
//                 log(s) + m
//   softmax       e = exp(x - m) with m as above; e / allreduce_sum(local sum e)
//   softmax_grad  y * (dy - allreduce_sum(local sum dy * y))
//   log_softmax   z = x - m; z - log(allreduce_sum(local sum exp(z)))
//   layer_norm    mean = allreduce_sum(local sum x) / n; c = x - mean;
//                 var = allreduce_sum(local sum c^2) / n; c * rsqrt(var + eps) [* scale] [+ bias]
//   rms_norm      x * rsqrt(allreduce_sum(local sum x^2) / n + eps) [* scale]
//   layer_norm_grad  mean_D(t) = allreduce_sum(local sum t) / n; c = x - mean_D(x);
//                 r = rsqrt(mean_D(c^2) + eps); xhat = c r; g = dy [* scale];
//                 (g - mean_D(g) - xhat mean_D(g xhat)) r
//   rms_norm_grad as layer_norm_grad with c = x and without mean_D(g)
//   cross-entropy logp = log_softmax(logits) as above; -allreduce_sum(local sum targets * logp)
//
// Two passes for the variance (mean first) match the reference kernel's numerics; the max before
// exp keeps every layout as stable as the single-process form.
#include <set>

#include "core/ops/lower_ops.h"
#include "core/ops/ops_math.h"

namespace meshrt {
namespace math {
namespace {

// Emits the local pieces of one op. Every piece is named after the op, so instructions (and
// errors) point at it. The first builder error is kept: later pieces emit nothing and return an
// empty tensor, and Result() returns that error, so a lowering reads as straight-line code.
class Pieces {
 public:
  Pieces(LoweringContext& ctx, const v1::Op& op) : ctx_(ctx), op_(op) {}

  // Mesh axes of size > 1 that split a dim of `t` named in `dims`.
  std::vector<int> SplitAxes(const LaidOutTensor& t, const std::set<std::string>& dims) const {
    std::vector<int> axes;
    for (int i = 0; i < t.shape.rank(); ++i) {
      const int a = t.layout.mesh_axis[i];
      if (a != kReplicated && ctx_.mesh().size(a) > 1 && dims.count(t.shape.dim(i).name)) {
        axes.push_back(a);
      }
    }
    return axes;
  }

  LaidOutTensor Unary(const std::string& type, const LaidOutTensor& x) {
    return Emit(NewOp(type), {x}, x.shape);
  }
  // a op b; b's dims are all in a's.
  LaidOutTensor Binary(const std::string& type, const LaidOutTensor& a, const LaidOutTensor& b) {
    return Emit(NewOp(type), {a, b}, a.shape);
  }
  LaidOutTensor WithScalar(const std::string& type, const LaidOutTensor& x, double scalar) {
    v1::Op op = NewOp(type);
    (*op.mutable_attrs())["scalar"].set_f(static_cast<float>(scalar));
    return Emit(op, {x}, x.shape);
  }
  // Local reduction of `x` over `dims` (x's other dims kept, in order).
  LaidOutTensor Reduce(const std::string& type, const LaidOutTensor& x,
                       const std::set<std::string>& dims) {
    v1::Op op = NewOp(type);
    for (const Dim& d : x.shape.dims()) {
      if (dims.count(d.name)) op.add_dims(d.name);
    }
    return Emit(op, {x}, Without(x.shape, dims));
  }
  LaidOutTensor AllReduce(const LaidOutTensor& t, const std::vector<int>& axes, v1::ReduceOp r) {
    if (!status_.ok()) return LaidOutTensor();
    return Keep(ctx_.builder.AllReduce(t, axes, r, op_.name()));
  }
  // The op itself, run on slices.
  absl::StatusOr<LaidOutTensor> Whole(const std::vector<LaidOutTensor>& inputs) {
    const TensorType& type = ctx_.graph.type(op_.name());
    return ctx_.builder.EmitLocal(op_, inputs, type.shape, type.dtype, ctx_.RuleLayout(type.shape));
  }
  // `t`, or the first error of any piece.
  absl::StatusOr<LaidOutTensor> Result(const LaidOutTensor& t) const {
    if (!status_.ok()) return status_;
    return t;
  }

 private:
  v1::Op NewOp(const std::string& type) const {
    v1::Op op;
    op.set_name(op_.name());
    op.set_type(type);
    return op;
  }
  LaidOutTensor Emit(const v1::Op& op, const std::vector<LaidOutTensor>& inputs,
                     const Shape& shape) {
    if (!status_.ok()) return LaidOutTensor();
    return Keep(ctx_.builder.EmitLocal(op, inputs, shape, DType::kFloat32, ctx_.RuleLayout(shape)));
  }
  LaidOutTensor Keep(absl::StatusOr<LaidOutTensor> t) {
    if (t.ok()) return *std::move(t);
    status_ = t.status();
    return LaidOutTensor();
  }

  LoweringContext& ctx_;
  const v1::Op& op_;
  absl::Status status_;  // the first error
};

std::set<std::string> OpDims(const v1::Op& op) { return {op.dims().begin(), op.dims().end()}; }

// The dims of `x` the graph's output of `op` lacks.
std::set<std::string> DroppedDims(LoweringContext& ctx, const v1::Op& op, const Shape& x) {
  const Shape& out = ctx.graph.type(op.name()).shape;
  std::set<std::string> dims;
  for (const Dim& d : x.dims()) {
    if (!out.Contains(d.name)) dims.insert(d.name);
  }
  return dims;
}

// z = x - max(x) over `dims` (global max), and sum of exp(z) over `dims` (global sum).
struct Shifted {
  LaidOutTensor max, z, exp, sum;
};
Shifted ShiftAndSum(Pieces& p, const LaidOutTensor& x, const std::set<std::string>& dims,
                    const std::vector<int>& axes) {
  Shifted s;
  s.max = p.AllReduce(p.Reduce("reduce_max", x, dims), axes, v1::REDUCE_MAX);
  s.z = p.Binary("sub", x, s.max);
  s.exp = p.Unary("exp", s.z);
  s.sum = p.AllReduce(p.Reduce("reduce_sum", s.exp, dims), axes, v1::REDUCE_SUM);
  return s;
}

}  // namespace

absl::StatusOr<LaidOutTensor> LowerLogSumExp(LoweringContext& ctx, const v1::Op& op,
                                             const std::vector<LaidOutTensor>& inputs) {
  Pieces p(ctx, op);
  const std::set<std::string> dims = DroppedDims(ctx, op, inputs[0].shape);
  const std::vector<int> axes = p.SplitAxes(inputs[0], dims);
  if (axes.empty()) return p.Whole(inputs);
  const Shifted s = ShiftAndSum(p, inputs[0], dims, axes);
  return p.Result(p.Binary("add", p.Unary("log", s.sum), s.max));
}

absl::StatusOr<LaidOutTensor> LowerSoftmax(LoweringContext& ctx, const v1::Op& op,
                                           const std::vector<LaidOutTensor>& inputs) {
  Pieces p(ctx, op);
  const std::set<std::string> dims = OpDims(op);
  const std::vector<int> axes = p.SplitAxes(inputs[0], dims);
  if (axes.empty()) return p.Whole(inputs);
  const Shifted s = ShiftAndSum(p, inputs[0], dims, axes);
  if (op.type() == "softmax") return p.Result(p.Binary("div", s.exp, s.sum));
  return p.Result(p.Binary("sub", s.z, p.Unary("log", s.sum)));
}

absl::StatusOr<LaidOutTensor> LowerSoftmaxGrad(LoweringContext& ctx, const v1::Op& op,
                                               const std::vector<LaidOutTensor>& inputs) {
  Pieces p(ctx, op);
  const std::set<std::string> dims = OpDims(op);
  const std::vector<int> axes = p.SplitAxes(inputs[0], dims);
  if (axes.empty()) return p.Whole(inputs);
  const LaidOutTensor& y = inputs[0];
  const LaidOutTensor& dy = inputs[1];
  const LaidOutTensor s =
      p.AllReduce(p.Reduce("reduce_sum", p.Binary("mul", dy, y), dims), axes, v1::REDUCE_SUM);
  return p.Result(p.Binary("mul", y, p.Binary("sub", dy, s)));
}

absl::StatusOr<LaidOutTensor> LowerNorm(LoweringContext& ctx, const v1::Op& op,
                                        const std::vector<LaidOutTensor>& inputs) {
  Pieces p(ctx, op);
  const LaidOutTensor& x = inputs[0];
  const std::set<std::string> dims = OpDims(op);
  const std::vector<int> axes = p.SplitAxes(x, dims);
  if (axes.empty()) return p.Whole(inputs);
  int64_t n = 1;
  for (const Dim& d : x.shape.dims()) n *= dims.count(d.name) ? d.size : 1;
  LaidOutTensor centred = x;
  if (op.type() == "layer_norm") {
    const LaidOutTensor sum = p.AllReduce(p.Reduce("reduce_sum", x, dims), axes, v1::REDUCE_SUM);
    centred = p.Binary("sub", x, p.WithScalar("mul", sum, 1.0 / static_cast<double>(n)));
  }
  const LaidOutTensor sq = p.Unary("square", centred);
  const LaidOutTensor ss = p.AllReduce(p.Reduce("reduce_sum", sq, dims), axes, v1::REDUCE_SUM);
  const LaidOutTensor var = p.WithScalar("mul", ss, 1.0 / static_cast<double>(n));
  const double eps = FloatAttrOr(op, "epsilon", 1e-6f);
  LaidOutTensor y = p.Binary("mul", centred, p.Unary("rsqrt", p.WithScalar("add", var, eps)));
  if (inputs.size() > 1) y = p.Binary("mul", y, inputs[1]);
  if (inputs.size() > 2) y = p.Binary("add", y, inputs[2]);
  return p.Result(y);
}

absl::StatusOr<LaidOutTensor> LowerNormGrad(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs) {
  Pieces p(ctx, op);
  const LaidOutTensor& x = inputs[0];
  const LaidOutTensor& dy = inputs.back();
  const std::set<std::string> dims = OpDims(op);
  const std::vector<int> axes = p.SplitAxes(x, dims);
  if (axes.empty()) return p.Whole(inputs);
  int64_t n = 1;
  for (const Dim& d : x.shape.dims()) n *= dims.count(d.name) ? d.size : 1;
  // The mean over the whole normalised dims of a tensor of x's shape: one allreduce per statistic.
  auto mean = [&](const LaidOutTensor& t) {
    const LaidOutTensor sum = p.AllReduce(p.Reduce("reduce_sum", t, dims), axes, v1::REDUCE_SUM);
    return p.WithScalar("mul", sum, 1.0 / static_cast<double>(n));
  };
  const bool layer = op.type() == "layer_norm_grad";
  const LaidOutTensor centred = layer ? p.Binary("sub", x, mean(x)) : x;
  const double eps = FloatAttrOr(op, "epsilon", 1e-6f);
  const LaidOutTensor r =
      p.Unary("rsqrt", p.WithScalar("add", mean(p.Unary("square", centred)), eps));
  const LaidOutTensor xhat = p.Binary("mul", centred, r);
  const LaidOutTensor g = inputs.size() == 3 ? p.Binary("mul", dy, inputs[1]) : dy;
  LaidOutTensor c = layer ? mean(g) : LaidOutTensor();
  const LaidOutTensor proj = p.Binary("mul", xhat, mean(p.Binary("mul", g, xhat)));
  c = layer ? p.Binary("add", proj, c) : proj;
  return p.Result(p.Binary("mul", p.Binary("sub", g, c), r));
}

absl::StatusOr<LaidOutTensor> LowerCrossEntropy(LoweringContext& ctx, const v1::Op& op,
                                                const std::vector<LaidOutTensor>& inputs) {
  Pieces p(ctx, op);
  const std::set<std::string> dims = OpDims(op);
  const std::vector<int> axes = p.SplitAxes(inputs[0], dims);
  if (axes.empty()) return p.Whole(inputs);
  const Shifted s = ShiftAndSum(p, inputs[0], dims, axes);
  const LaidOutTensor logp = p.Binary("sub", s.z, p.Unary("log", s.sum));
  // logp first: the product (and so the loss) keeps the logits' dim order, the output's.
  const LaidOutTensor prod = p.Binary("mul", logp, inputs[1]);
  const LaidOutTensor loss = p.AllReduce(p.Reduce("reduce_sum", prod, dims), axes, v1::REDUCE_SUM);
  return p.Result(p.Unary("neg", loss));
}

}  // namespace math
}  // namespace meshrt
