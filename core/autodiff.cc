#include "core/autodiff.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/graph.h"
#include "core/status_macros.h"

namespace meshrt {
namespace {

const std::set<std::string>& Rules() {
  static const auto* rules = new std::set<std::string>{
      "einsum", "add",  "sub",  "mul",    "div",     "neg",        "scale",       "relu",
      "exp",    "log",  "sqrt", "square", "tanh",    "sigmoid",    "reduce_sum",  "reduce_mean",
      "reshape", "rename_dim", "softmax", "log_softmax", "softmax_cross_entropy"};
  return *rules;
}

v1::Op Typed(const std::string& type) {
  v1::Op op;
  op.set_type(type);
  return op;
}

v1::Op WithScalar(const std::string& type, float scalar, bool scalar_first = false) {
  v1::Op op = Typed(type);
  (*op.mutable_attrs())["scalar"].set_f(scalar);
  if (scalar_first) (*op.mutable_attrs())["scalar_first"].set_b(true);
  return op;
}

// An op of `type` over the same `dims` as `like` (the normalised dims of a softmax).
v1::Op WithDims(const std::string& type, const v1::Op& like) {
  v1::Op op = Typed(type);
  *op.mutable_dims() = like.dims();
  return op;
}

bool HasScalar(const v1::Op& op) { return op.attrs().count("scalar") > 0; }

class Differentiator {
 public:
  Differentiator(GraphBuilder& b, const Graph& graph) : b_(b), graph_(graph) {}

  TensorRef Ref(const std::string& name) {
    const TensorType& t = graph_.type(name);
    return TensorRef{name, t.shape, t.dtype};
  }

  // dy summed to `shape` (over dims it lacks) and in its dim order.
  TensorRef SumTo(const TensorRef& dy, const Shape& shape) {
    if (dy.shape == shape) return dy;
    return b_.Einsum({dy}, shape);
  }

  void AddGrad(const std::string& name, const TensorRef& g) {
    auto it = grads_.find(name);
    if (it == grads_.end()) {
      grads_[name] = g;
    } else {
      it->second = b_.Add(it->second, g);
    }
  }

  absl::Status Backprop(const v1::Op& op, const TensorRef& dy) {
    const std::string& t = op.type();
    const TensorRef y = Ref(op.name());
    std::vector<TensorRef> in;
    for (const std::string& name : op.inputs()) in.push_back(Ref(name));
    auto grad = [&](int i, const TensorRef& g) { AddGrad(op.inputs(i), SumTo(g, in[i].shape)); };
    if (t == "einsum") {
      for (size_t i = 0; i < in.size(); ++i) {
        std::vector<TensorRef> factors = {dy};
        for (size_t j = 0; j < in.size(); ++j) {
          if (j != i) factors.push_back(in[j]);
        }
        AddGrad(op.inputs(i), b_.Einsum(factors, in[i].shape));
      }
    } else if (t == "scale") {
      grad(0, b_.Scale(dy, op.attrs().at("scalar").f()));
    } else if ((t == "add" || t == "sub" || t == "mul") && HasScalar(op)) {
      const float s = op.attrs().at("scalar").value_case() == v1::AttrValue::kF
                          ? op.attrs().at("scalar").f()
                          : static_cast<float>(op.attrs().at("scalar").i());
      const bool first = op.attrs().count("scalar_first") && op.attrs().at("scalar_first").b();
      if (t == "add") grad(0, dy);
      if (t == "sub") grad(0, first ? b_.Neg(dy) : dy);
      if (t == "mul") grad(0, b_.Scale(dy, s));
    } else if (HasScalar(op)) {
      return absl::UnimplementedError(
          absl::StrCat("no gradient yet for op '", op.name(), "' (", t, " with a scalar operand)"));
    } else if (t == "add") {
      grad(0, dy);
      grad(1, dy);
    } else if (t == "sub") {
      grad(0, dy);
      grad(1, b_.Neg(dy));
    } else if (t == "mul") {
      AddGrad(op.inputs(0), b_.Einsum({dy, in[1]}, in[0].shape));
      AddGrad(op.inputs(1), b_.Einsum({dy, in[0]}, in[1].shape));
    } else if (t == "div") {  // d/dx = 1/y, d/dy = -x/y^2 = -out/y
      AddGrad(op.inputs(0), SumTo(b_.Div(dy, in[1]), in[0].shape));
      AddGrad(op.inputs(1), SumTo(b_.Neg(b_.Mul(dy, b_.Div(y, in[1]))), in[1].shape));
    } else if (t == "neg") {
      grad(0, b_.Neg(dy));
    } else if (t == "relu") {
      grad(0, b_.Mul(dy, b_.Apply(WithScalar("greater", 0.0f), {in[0]})));
    } else if (t == "exp") {
      grad(0, b_.Mul(dy, y));
    } else if (t == "log") {
      grad(0, b_.Div(dy, in[0]));
    } else if (t == "sqrt") {
      grad(0, b_.Div(dy, b_.Scale(y, 2.0f)));
    } else if (t == "square") {
      grad(0, b_.Mul(dy, b_.Scale(in[0], 2.0f)));
    } else if (t == "tanh") {  // 1 - y^2
      grad(0, b_.Mul(dy, b_.Apply(WithScalar("sub", 1.0f, true), {b_.Apply(Typed("square"), {y})})));
    } else if (t == "sigmoid") {  // y (1 - y)
      grad(0, b_.Mul(dy, b_.Mul(y, b_.Apply(WithScalar("sub", 1.0f, true), {y}))));
    } else if (t == "reduce_sum") {
      grad(0, b_.Einsum({dy}, in[0].shape));
    } else if (t == "reduce_mean") {
      const double count =
          static_cast<double>(in[0].shape.num_elements()) / std::max<int64_t>(1, y.shape.num_elements());
      grad(0, b_.Scale(b_.Einsum({dy}, in[0].shape), static_cast<float>(1.0 / count)));
    } else if (t == "softmax") {  // y (dy - sum_D(dy y))
      TensorRef s = b_.Apply(WithDims("reduce_sum", op), {b_.Mul(dy, y)});
      grad(0, b_.Mul(y, b_.Sub(dy, s)));
    } else if (t == "log_softmax") {  // dy - exp(y) sum_D(dy)
      TensorRef s = b_.Apply(WithDims("reduce_sum", op), {dy});
      grad(0, b_.Sub(dy, b_.Mul(b_.Exp(y), s)));
    } else if (t == "softmax_cross_entropy") {
      // loss = -sum_D t log_softmax(l): dl = dy (softmax(l) sum_D(t) - t), dt = -dy log_softmax(l)
      TensorRef p = b_.Apply(WithDims("softmax", op), {in[0]});
      TensorRef mass = b_.Apply(WithDims("reduce_sum", op), {in[1]});
      grad(0, b_.Mul(dy, b_.Sub(b_.Mul(p, mass), in[1])));
      grad(1, b_.Neg(b_.Mul(dy, b_.Apply(WithDims("log_softmax", op), {in[0]}))));
    } else if (t == "reshape" || t == "rename_dim") {
      grad(0, b_.Reshape(dy, in[0].shape));
    } else {
      return absl::UnimplementedError(
          absl::StrCat("no gradient yet for op '", op.name(), "' (", t, ")"));
    }
    return b_.status();
  }

  absl::StatusOr<std::vector<TensorRef>> Run(const TensorRef& loss,
                                             const std::vector<TensorRef>& xs) {
    // Ops on a path from some x to the loss.
    std::set<std::string> from_x;
    for (const TensorRef& x : xs) from_x.insert(x.name);
    for (int i : graph_.topological_order()) {
      const v1::Op& op = graph_.op(i);
      for (const std::string& in : op.inputs()) {
        if (from_x.count(in)) from_x.insert(op.name());
      }
    }
    std::set<std::string> to_loss = {loss.name};
    const std::vector<int>& order = graph_.topological_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const v1::Op& op = graph_.op(*it);
      if (!to_loss.count(op.name())) continue;
      for (const std::string& in : op.inputs()) to_loss.insert(in);
    }
    v1::Op ones = Typed("ones");
    *ones.mutable_shape() = loss.shape.ToProto();
    grads_[loss.name] = b_.Apply(ones, {});
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const v1::Op& op = graph_.op(*it);
      if (!from_x.count(op.name()) || !to_loss.count(op.name()) || op.inputs_size() == 0) continue;
      auto g = grads_.find(op.name());
      if (g == grads_.end()) continue;
      RETURN_IF_ERROR(Backprop(op, g->second));
    }
    std::vector<TensorRef> out;
    for (const TensorRef& x : xs) {
      auto g = grads_.find(x.name);
      if (g != grads_.end()) {
        out.push_back(g->second);
      } else {
        v1::Op zeros = Typed("zeros");
        *zeros.mutable_shape() = x.shape.ToProto();
        out.push_back(b_.Apply(zeros, {}));
      }
    }
    RETURN_IF_ERROR(b_.status());
    return out;
  }

 private:
  GraphBuilder& b_;
  const Graph& graph_;
  std::map<std::string, TensorRef> grads_;
};

}  // namespace

bool HasGradient(const std::string& type) { return Rules().count(type) > 0; }

absl::StatusOr<std::vector<TensorRef>> Gradients(GraphBuilder& b, const TensorRef& loss,
                                                 const std::vector<TensorRef>& xs) {
  ASSIGN_OR_RETURN(Graph graph, b.Build());
  if (!graph.HasTensor(loss.name)) {
    return absl::InvalidArgumentError(absl::StrCat("loss '", loss.name, "' is not in the graph"));
  }
  for (const TensorRef& x : xs) {
    if (!graph.HasTensor(x.name)) {
      return absl::InvalidArgumentError(absl::StrCat("'", x.name, "' is not in the graph"));
    }
  }
  return Differentiator(b, graph).Run(loss, xs);
}

}  // namespace meshrt
