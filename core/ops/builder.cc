#include "core/ops/builder.h"

#include "absl/strings/str_cat.h"

namespace meshrt {

TensorRef GraphBuilder::Apply(v1::Op op, const std::vector<TensorRef>& inputs,
                              const std::string& name) {
  if (!status_.ok()) return TensorRef{};
  const bool scoped = !scope_.empty() && !IsVariable(op) && !IsFed(op);
  std::string n = scoped && !name.empty() ? scope_ + name : name;
  if (n.empty() && !scoped) {
    do {
      n = absl::StrCat(op.type(), "_", counters_[op.type()]++);
    } while (types_.count(n));
  } else if (n.empty()) {  // "<scope>/<type>", then "<scope>/<type>_1", ...
    const std::string base = scope_ + op.type();
    do {
      const int k = counters_[base]++;
      n = k == 0 ? base : absl::StrCat(base, "_", k);
    } while (types_.count(n));
  }
  if (types_.count(n)) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("two ops are called '", n, "'; op names must be unique"));
    return TensorRef{};
  }
  op.set_name(n);
  std::vector<TensorType> in_types;
  for (const TensorRef& in : inputs) {
    auto it = types_.find(in.name);
    if (it == types_.end()) {
      status_ = absl::InvalidArgumentError(absl::StrCat(
          "op '", n, "' (", op.type(), ") reads '", in.name, "', which this builder did not make"));
      return TensorRef{};
    }
    op.add_inputs(in.name);
    in_types.push_back(it->second);
  }
  auto type = InferOutputType(op, in_types);
  if (!type.ok()) {
    status_ = type.status();
    return TensorRef{};
  }
  types_[n] = *type;
  *graph_.add_ops() = std::move(op);
  return TensorRef{n, type->shape, type->dtype};
}

TensorRef GraphBuilder::Placeholder(const std::string& name, const Shape& shape, DType dtype) {
  v1::Op op;
  op.set_type("placeholder");
  *op.mutable_shape() = shape.ToProto();
  op.set_dtype(DTypeToProto(dtype));
  if (name.empty()) {
    status_.Update(absl::InvalidArgumentError("a placeholder needs a name (feeds refer to it)"));
  }
  return Apply(std::move(op), {}, name);
}

TensorRef GraphBuilder::Variable(const std::string& name, const Shape& shape,
                                 const Initializer& init, DType dtype) {
  v1::Op op;
  op.set_type("variable");
  *op.mutable_shape() = shape.ToProto();
  op.set_dtype(DTypeToProto(dtype));
  auto& attrs = *op.mutable_attrs();
  attrs["initializer"].set_s(init.kind);
  if (init.kind == "constant") attrs["value"].set_f(init.value);
  if (init.kind == "uniform") {
    attrs["minval"].set_f(init.minval);
    attrs["maxval"].set_f(init.maxval);
  }
  if (init.kind == "normal" || init.kind == "truncated_normal") {
    attrs["mean"].set_f(init.mean);
    attrs["stddev"].set_f(init.stddev);
  }
  if (init.seed != 0) attrs["seed"].set_i(init.seed);
  for (const std::string& d : init.fan_in) op.add_dims(d);
  if (name.empty()) {
    status_.Update(absl::InvalidArgumentError("a variable needs a name (checkpoints refer to it)"));
  }
  return Apply(std::move(op), {}, name);
}

TensorRef GraphBuilder::Assign(const TensorRef& var, const TensorRef& value,
                               const std::string& name) {
  return Binary("assign", var, value, name);
}

TensorRef GraphBuilder::AssignAdd(const TensorRef& var, const TensorRef& delta,
                                  const std::string& name) {
  return Binary("assign_add", var, delta, name);
}

TensorRef GraphBuilder::Constant(const Tensor& value, const std::string& name) {
  v1::Op op;
  op.set_type("constant");
  *op.mutable_value() = value.ToProto();
  return Apply(std::move(op), {}, name);
}

TensorRef GraphBuilder::Einsum(const std::vector<TensorRef>& inputs, const Shape& output,
                               const std::string& name) {
  v1::Op op;
  op.set_type("einsum");
  *op.mutable_shape() = output.ToProto();
  return Apply(std::move(op), inputs, name);
}

TensorRef GraphBuilder::Unary(const std::string& type, const TensorRef& x,
                              const std::string& name) {
  v1::Op op;
  op.set_type(type);
  return Apply(std::move(op), {x}, name);
}

TensorRef GraphBuilder::Binary(const std::string& type, const TensorRef& x, const TensorRef& y,
                               const std::string& name) {
  v1::Op op;
  op.set_type(type);
  return Apply(std::move(op), {x, y}, name);
}

TensorRef GraphBuilder::Add(const TensorRef& x, const TensorRef& y, const std::string& name) {
  return Binary("add", x, y, name);
}
TensorRef GraphBuilder::Sub(const TensorRef& x, const TensorRef& y, const std::string& name) {
  return Binary("sub", x, y, name);
}
TensorRef GraphBuilder::Mul(const TensorRef& x, const TensorRef& y, const std::string& name) {
  return Binary("mul", x, y, name);
}
TensorRef GraphBuilder::Div(const TensorRef& x, const TensorRef& y, const std::string& name) {
  return Binary("div", x, y, name);
}
TensorRef GraphBuilder::Relu(const TensorRef& x, const std::string& name) {
  return Unary("relu", x, name);
}
TensorRef GraphBuilder::Exp(const TensorRef& x, const std::string& name) {
  return Unary("exp", x, name);
}
TensorRef GraphBuilder::Neg(const TensorRef& x, const std::string& name) {
  return Unary("neg", x, name);
}

TensorRef GraphBuilder::Scale(const TensorRef& x, float scalar, const std::string& name) {
  v1::Op op;
  op.set_type("scale");
  (*op.mutable_attrs())["scalar"].set_f(scalar);
  return Apply(std::move(op), {x}, name);
}

TensorRef GraphBuilder::Reduce(const std::string& type, const TensorRef& x,
                               const std::vector<std::string>& dims, const std::string& name) {
  v1::Op op;
  op.set_type(type);
  for (const std::string& d : dims) op.add_dims(d);
  return Apply(std::move(op), {x}, name);
}

TensorRef GraphBuilder::ReduceSum(const TensorRef& x, const std::vector<std::string>& dims,
                                  const std::string& name) {
  return Reduce("reduce_sum", x, dims, name);
}
TensorRef GraphBuilder::ReduceMax(const TensorRef& x, const std::vector<std::string>& dims,
                                  const std::string& name) {
  return Reduce("reduce_max", x, dims, name);
}
TensorRef GraphBuilder::ReduceMean(const TensorRef& x, const std::vector<std::string>& dims,
                                   const std::string& name) {
  return Reduce("reduce_mean", x, dims, name);
}

TensorRef GraphBuilder::Reshape(const TensorRef& x, const Shape& shape, const std::string& name) {
  v1::Op op;
  op.set_type("reshape");
  *op.mutable_shape() = shape.ToProto();
  return Apply(std::move(op), {x}, name);
}

TensorRef GraphBuilder::RenameDim(const TensorRef& x, const std::string& old_name,
                                  const std::string& new_name, const std::string& name) {
  v1::Op op;
  op.set_type("rename_dim");
  (*op.mutable_attrs())["old"].set_s(old_name);
  (*op.mutable_attrs())["new"].set_s(new_name);
  return Apply(std::move(op), {x}, name);
}

void GraphBuilder::MarkOutput(const TensorRef& t) {
  if (!status_.ok()) return;
  for (const std::string& o : graph_.outputs()) {
    if (o == t.name) return;
  }
  graph_.add_outputs(t.name);
}

GraphBuilder GraphBuilder::Extending(const Graph& graph) {
  GraphBuilder b;
  b.graph_ = graph.proto();
  for (const v1::Op& op : graph.proto().ops()) b.types_[op.name()] = graph.type(op.name());
  return b;
}

absl::StatusOr<TensorRef> GraphBuilder::Find(const std::string& name) const {
  auto it = types_.find(name);
  if (it == types_.end()) {
    return absl::NotFoundError(absl::StrCat("the graph has no tensor '", name, "'"));
  }
  return TensorRef{name, it->second.shape, it->second.dtype};
}

absl::StatusOr<Graph> GraphBuilder::Build() const {
  if (!status_.ok()) return status_;
  return Graph::Build(graph_);
}

}  // namespace meshrt
