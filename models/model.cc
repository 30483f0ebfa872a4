#include "models/model.h"

namespace meshrt {
namespace models {

TensorRef DataStep(GraphBuilder& b) {
  TensorRef step = b.Variable(kDataStep, Shape({}));
  v1::Op one;
  one.set_type("ones");
  b.AssignAdd(step, b.Apply(one, {}, "data_step/one"), "data_step/next");
  return step;
}

TensorRef ScalarOp(GraphBuilder& b, const std::string& type, const TensorRef& x, float s,
                   const std::string& name) {
  v1::Op op;
  op.set_type(type);
  (*op.mutable_attrs())["scalar"].set_f(s);
  return b.Apply(std::move(op), {x}, name);
}

TensorRef Elementwise(GraphBuilder& b, const std::string& type,
                      const std::vector<TensorRef>& inputs, const std::string& name) {
  v1::Op op;
  op.set_type(type);
  return b.Apply(std::move(op), inputs, name);
}

TensorRef OneHot(GraphBuilder& b, const TensorRef& ids, const Dim& depth, const std::string& name) {
  v1::Op op;
  op.set_type("one_hot");
  *op.mutable_shape() = Shape({depth}).ToProto();
  return b.Apply(std::move(op), {ids}, name);
}

TensorRef Range(GraphBuilder& b, const Dim& dim, const std::string& name) {
  v1::Op op;
  op.set_type("range");
  *op.mutable_shape() = Shape({dim}).ToProto();
  return b.Apply(std::move(op), {}, name);
}

TensorRef Cast(GraphBuilder& b, const TensorRef& x, const std::string& dtype,
               const std::string& name) {
  v1::Op op;
  op.set_type("cast");
  (*op.mutable_attrs())["dtype"].set_s(dtype);
  return b.Apply(std::move(op), {x}, name);
}

TensorRef Normalize(GraphBuilder& b, const std::string& type, const std::vector<TensorRef>& inputs,
                    const std::vector<std::string>& dims, float epsilon, const std::string& name) {
  v1::Op op;
  op.set_type(type);
  for (const std::string& d : dims) op.add_dims(d);
  if (epsilon > 0) (*op.mutable_attrs())["epsilon"].set_f(epsilon);
  return b.Apply(std::move(op), inputs, name);
}

namespace {

TensorRef Random(GraphBuilder& b, const std::string& type, const Shape& shape,
                 const TensorRef& step, int64_t seed, const std::string& a, float av,
                 const std::string& c, float cv, const std::string& name) {
  v1::Op op;
  op.set_type(type);
  *op.mutable_shape() = shape.ToProto();
  auto& attrs = *op.mutable_attrs();
  attrs["seed"].set_i(seed);
  attrs[a].set_f(av);
  attrs[c].set_f(cv);
  std::vector<TensorRef> inputs;
  if (!step.name.empty()) inputs.push_back(step);
  return b.Apply(std::move(op), inputs, name);
}

}  // namespace

TensorRef RandomUniform(GraphBuilder& b, const Shape& shape, const TensorRef& step, int64_t seed,
                        float minval, float maxval, const std::string& name) {
  return Random(b, "random_uniform", shape, step, seed, "minval", minval, "maxval", maxval, name);
}

TensorRef RandomNormal(GraphBuilder& b, const Shape& shape, const TensorRef& step, int64_t seed,
                       float mean, float stddev, const std::string& name) {
  return Random(b, "random_normal", shape, step, seed, "mean", mean, "stddev", stddev, name);
}

Shape RenameIn(const Shape& s, const std::string& from, const std::string& to) {
  std::vector<Dim> dims = s.dims();
  for (Dim& d : dims) {
    if (d.name == from) d.name = to;
  }
  return Shape(std::move(dims));
}

Shape Drop(const Shape& s, const std::string& name) {
  std::vector<Dim> dims;
  for (const Dim& d : s.dims()) {
    if (d.name != name) dims.push_back(d);
  }
  return Shape(std::move(dims));
}

Shape Concat(const Shape& a, const std::vector<Dim>& more) {
  std::vector<Dim> dims = a.dims();
  dims.insert(dims.end(), more.begin(), more.end());
  return Shape(std::move(dims));
}

}  // namespace models
}  // namespace meshrt
