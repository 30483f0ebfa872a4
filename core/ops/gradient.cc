#include "core/ops/gradient.h"

#include <algorithm>

#include "core/ir/tensor.h"

namespace meshrt {

namespace gradient {

v1::Op Typed(const std::string& type) {
  v1::Op op;
  op.set_type(type);
  return op;
}

v1::Op WithScalar(const std::string& type, float scalar, bool scalar_first) {
  v1::Op op = Typed(type);
  (*op.mutable_attrs())["scalar"].set_f(scalar);
  if (scalar_first) (*op.mutable_attrs())["scalar_first"].set_b(true);
  return op;
}

v1::Op WithDims(const std::string& type, const v1::Op& like) {
  v1::Op op = Typed(type);
  *op.mutable_dims() = like.dims();
  return op;
}

v1::Op Copy(const v1::Op& op) {
  v1::Op c = op;
  c.clear_name();
  c.clear_inputs();
  return c;
}

bool HasScalar(const v1::Op& op) { return op.attrs().count("scalar") > 0; }

float Scalar(const v1::Op& op) {
  const v1::AttrValue& v = op.attrs().at("scalar");
  return v.value_case() == v1::AttrValue::kF ? v.f() : static_cast<float>(v.i());
}

bool ScalarFirst(const v1::Op& op) { return BoolAttrOr(op, "scalar_first", false); }

bool OnlyDimsOf(const Shape& s, const v1::Op& op) {
  for (const Dim& d : s.dims()) {
    if (std::find(op.dims().begin(), op.dims().end(), d.name) == op.dims().end()) return false;
  }
  return true;
}

}  // namespace gradient

namespace {

std::vector<TensorRef> InputRefs(const GradientContext& ctx, const v1::Op& op) {
  std::vector<TensorRef> in;
  for (const std::string& name : op.inputs()) in.push_back(ctx.Ref(name));
  return in;
}

}  // namespace

Backward::Backward(GradientContext& ctx, const v1::Op& op, const TensorRef& dy)
    : op(op), dy(dy), y(ctx.Ref(op.name())), in(InputRefs(ctx, op)), b(ctx.builder()), ctx_(ctx) {}

void Backward::Grad(int i, const TensorRef& g) {
  if (in[i].dtype != DType::kFloat32) return;
  ctx_.AddGrad(op.inputs(i), SumTo(g, in[i].shape));
}

void Backward::GradOfShape(int i, const TensorRef& g) { ctx_.AddGrad(op.inputs(i), g); }

TensorRef Backward::SumTo(const TensorRef& g, const Shape& shape) {
  if (g.shape == shape) return g;
  return b.Einsum({g}, shape);
}

TensorRef Backward::Unary(const std::string& type, const TensorRef& x) {
  return b.Apply(gradient::Typed(type), {x});
}

TensorRef Backward::Binary(const std::string& type, const TensorRef& x, const TensorRef& other) {
  return b.Apply(gradient::Typed(type), {x, other});
}

TensorRef Backward::WithS(const std::string& type, const TensorRef& x, float s, bool first) {
  return b.Apply(gradient::WithScalar(type, s, first), {x});
}

TensorRef Backward::OnDims(const std::string& type, const TensorRef& x) {
  return b.Apply(gradient::WithDims(type, op), {x});
}

TensorRef Backward::DimOp(const std::string& type, const TensorRef& x, const std::string& dim,
                          const std::map<std::string, int64_t>& ints, const std::string& new_dim) {
  v1::Op o = gradient::Typed(type);
  o.add_dims(dim);
  for (const auto& [k, v] : ints) (*o.mutable_attrs())[k].set_i(v);
  if (!new_dim.empty()) (*o.mutable_attrs())["new_dim"].set_s(new_dim);
  return b.Apply(o, {x});
}

TensorRef Backward::Slice(const TensorRef& x, const std::string& dim, int64_t begin, int64_t size,
                          const std::string& new_dim) {
  return DimOp("slice", x, dim, {{"begin", begin}, {"size", size}}, new_dim);
}

TensorRef Backward::Pad(const TensorRef& x, const std::string& dim, int64_t before, int64_t after,
                        const std::string& new_dim) {
  return DimOp("pad", x, dim, {{"before", before}, {"after", after}}, new_dim);
}

TensorRef Backward::Shift(const TensorRef& x, const std::string& dim, int64_t offset, bool wrap) {
  if (offset == 0) return x;
  v1::Op o = gradient::Typed("shift");
  o.add_dims(dim);
  (*o.mutable_attrs())["offset"].set_i(offset);
  if (wrap) (*o.mutable_attrs())["wrap"].set_b(true);
  return b.Apply(o, {x});
}

TensorRef Backward::Unstack(const TensorRef& x, const std::string& dim, int64_t index) {
  return DimOp("unstack", x, dim, {{"index", index}});
}

TensorRef Backward::Rename(const TensorRef& x, const std::string& from, const std::string& to) {
  return from == to ? x : b.RenameDim(x, from, to);
}

TensorRef Backward::OneHot(const TensorRef& indices, const Dim& depth) {
  v1::Op o = gradient::Typed("one_hot");
  *o.mutable_shape() = Shape({depth}).ToProto();
  return b.Apply(o, {indices});
}

TensorRef Backward::Zeros(const Shape& shape) {
  v1::Op o = gradient::Typed("zeros");
  *o.mutable_shape() = shape.ToProto();
  return b.Apply(o, {});
}

TensorRef Backward::Basis(const Dim& dim, int64_t index) {
  std::vector<float> v(dim.size, 0.0f);
  v[index] = 1.0f;
  return b.Constant(Tensor::Float(Shape({dim}), v));
}

}  // namespace meshrt
