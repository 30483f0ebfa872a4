// The elementwise ops of the math family: shape inference, reference kernels, registration.
// Conventions (dtypes, broadcasting by name, the scalar operand) are in core/ops/ops_math.h. They lower
// with the elementwise family default (core/lowering/lower_elementwise.cc): one local op, no communication,
// because a dim an input lacks is whole on every processor and the kernel broadcasts it.
//
// The reference kernels compute float32 ops in double and round once, so they are at least as
// precise as the fast kernels they judge (//kernels).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/ops/op_cost.h"
#include "core/ops/ops_math.h"
#include "core/ops/reference_kernels.h"
#include "util/status_macros.h"

namespace meshrt {
namespace math {
namespace {

bool IsOneOf(const std::string& t, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (t == n) return true;
  }
  return false;
}

bool FloatOnlyUnary(const std::string& t) {
  return IsOneOf(t,
                 {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "gelu", "reciprocal", "scale"});
}
bool IsPredicate(const std::string& t) {
  return IsOneOf(t, {"equal", "less", "greater", "logical_and", "logical_or"});
}
bool FloatOnlyBinary(const std::string& t) { return t == "div" || t == "pow"; }

// ---- shape inference ----------------------------------------------------------------------

absl::StatusOr<TensorType> InferUnary(const v1::Op& op, const std::vector<TensorType>& in) {
  const std::string& t = op.type();
  if (t == "cast") {
    ASSIGN_OR_RETURN(DType to, CastTarget(op));
    return TensorType{in[0].shape, to};
  }
  if (t == "scale") RETURN_IF_ERROR(ScalarAttr(op).status());
  if (FloatOnlyUnary(t) && in[0].dtype != DType::kFloat32) {
    return OpError(op, absl::StrCat("input '", op.inputs(0), "' is ", DTypeName(in[0].dtype), "; ",
                                    t, " needs float32 (cast it first)"));
  }
  return in[0];
}

// Checks the scalar-operand attributes of a binary op or where. `arity` is the op's full arity
// (2 or 3); the scalar stands in for the last operand.
absl::Status CheckScalarForm(const v1::Op& op, const std::vector<TensorType>& in, int arity) {
  const bool scalar = HasScalar(op);
  const int want = scalar ? arity - 1 : arity;
  if (static_cast<int>(in.size()) != want) {
    return OpError(
        op, scalar ? absl::StrCat("has attrs.scalar, so takes ", want, " input(s), not ", in.size())
                   : absl::StrCat("takes ", arity, " input(s) but has ", in.size(), " (or ",
                                  arity - 1, " and attrs {scalar: f})"));
  }
  if (BoolAttrOr(op, "scalar_first", false)) {
    if (!scalar) return OpError(op, "has scalar_first but no attrs.scalar");
    if (arity == 3) return OpError(op, "scalar_first is for binary ops; where's scalar is y");
  }
  if (scalar) {
    ASSIGN_OR_RETURN(double v, ScalarAttr(op));
    const DType operand = in.back().dtype;
    if (operand == DType::kInt32 && v != std::trunc(v)) {
      return OpError(op, absl::StrCat("scalar ", v, " is not a whole number but input '",
                                      op.inputs(in.size() - 1), "' is int32"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorType> InferBinary(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(CheckScalarForm(op, in, 2));
  if (in.size() == 2 && in[0].dtype != in[1].dtype) {
    return OpError(
        op, absl::StrCat("inputs '", op.inputs(0), "' (", DTypeName(in[0].dtype), ") and '",
                         op.inputs(1), "' (", DTypeName(in[1].dtype), ") have different dtypes"));
  }
  if (FloatOnlyBinary(op.type()) && in[0].dtype != DType::kFloat32) {
    return OpError(op, absl::StrCat(op.type(), " needs float32 inputs (cast them first)"));
  }
  std::vector<Shape> shapes;
  for (const TensorType& t : in) shapes.push_back(t.shape);
  ASSIGN_OR_RETURN(Shape out, BroadcastShape(op, shapes));
  return TensorType{out, IsPredicate(op.type()) ? DType::kFloat32 : in[0].dtype};
}

absl::StatusOr<TensorType> InferWhere(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(CheckScalarForm(op, in, 3));
  if (in.size() == 3 && in[1].dtype != in[2].dtype) {
    return OpError(
        op, absl::StrCat("x '", op.inputs(1), "' (", DTypeName(in[1].dtype), ") and y '",
                         op.inputs(2), "' (", DTypeName(in[2].dtype), ") have different dtypes"));
  }
  std::vector<Shape> shapes;
  for (const TensorType& t : in) shapes.push_back(t.shape);
  ASSIGN_OR_RETURN(Shape out, BroadcastShape(op, shapes));
  return TensorType{out, in[1].dtype};
}

// ---- reference kernels --------------------------------------------------------------------

// A 0-d tensor of `dtype` holding `v` (the scalar operand as a broadcast input).
Tensor ScalarTensor(DType dtype, double v) {
  return dtype == DType::kFloat32 ? Tensor::Float(Shape(), {static_cast<float>(v)})
                                  : Tensor::Int(Shape(), {static_cast<int32_t>(v)});
}

double Gelu(double x, bool approximate) {
  if (approximate) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

template <typename T>
double Sign(T v) {
  return v > T(0) ? 1.0 : v < T(0) ? -1.0 : 0.0;
}

template <typename T>
absl::Status UnaryTyped(const v1::Op& op, const Tensor& x, Tensor* out) {
  const std::string& t = op.type();
  const T* px = DataOf<T>(x);
  T* o = MutableDataOf<T>(out);
  const std::vector<int64_t> off = Offsets(x.shape(), out->shape());
  auto apply = [&](auto f) {
    for (size_t i = 0; i < off.size(); ++i) {
      o[i] = static_cast<T>(f(static_cast<double>(px[off[i]])));
    }
  };
  if (t == "relu") {
    apply([](double v) { return v > 0 ? v : 0.0; });
  } else if (t == "neg") {
    apply([](double v) { return -v; });
  } else if (t == "abs") {
    apply([](double v) { return std::fabs(v); });
  } else if (t == "sign") {
    apply([](double v) { return Sign(v); });
  } else if (t == "square") {
    apply([](double v) { return v * v; });
  } else if (std::is_same<T, int32_t>::value) {
    return absl::InvalidArgumentError(absl::StrCat(t, " needs float32, not int32"));
  } else if (t == "exp") {
    apply([](double v) { return std::exp(v); });
  } else if (t == "log") {
    apply([](double v) { return std::log(v); });
  } else if (t == "sqrt") {
    apply([](double v) { return std::sqrt(v); });
  } else if (t == "rsqrt") {
    apply([](double v) { return 1.0 / std::sqrt(v); });
  } else if (t == "reciprocal") {
    apply([](double v) { return 1.0 / v; });
  } else if (t == "tanh") {
    apply([](double v) { return std::tanh(v); });
  } else if (t == "sigmoid") {
    apply([](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  } else if (t == "gelu") {
    const bool approximate = BoolAttrOr(op, "approximate", true);
    apply([approximate](double v) { return Gelu(v, approximate); });
  } else if (t == "scale") {
    ASSIGN_OR_RETURN(double s, ScalarAttr(op));
    apply([s](double v) { return v * static_cast<float>(s); });
  } else {
    return absl::UnimplementedError(absl::StrCat("no unary kernel for ", t));
  }
  return absl::OkStatus();
}

int32_t CastToInt(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483647.0f) return std::numeric_limits<int32_t>::max();
  if (v <= -2147483648.0f) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);  // truncates toward zero
}

absl::Status Cast(const Tensor& x, Tensor* out) {
  const std::vector<int64_t> off = Offsets(x.shape(), out->shape());
  for (size_t i = 0; i < off.size(); ++i) {
    if (out->dtype() == DType::kInt32) {
      out->i32()[i] = x.dtype() == DType::kInt32 ? x.i32()[off[i]] : CastToInt(x.f32()[off[i]]);
    } else {
      out->f32()[i] =
          x.dtype() == DType::kInt32 ? static_cast<float>(x.i32()[off[i]]) : x.f32()[off[i]];
    }
  }
  return absl::OkStatus();
}

absl::Status UnaryKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  RETURN_IF_ERROR(CheckInputs(inputs, 1, 1));
  const Tensor& x = *inputs[0];
  RETURN_IF_ERROR(CheckDimsIn(x.shape(), "the input", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(out->shape(), "the output", x.shape(), "the input"));
  if (op.type() == "cast") return Cast(x, out);
  if (x.dtype() != out->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("the input is ", DTypeName(x.dtype()),
                                                   " but the output is ", DTypeName(out->dtype())));
  }
  return x.dtype() == DType::kFloat32 ? UnaryTyped<float>(op, x, out)
                                      : UnaryTyped<int32_t>(op, x, out);
}

// o[i] = f(a, b) over the output's index space, both operands broadcast by name.
template <typename T, typename U, typename F>
void BinaryLoop(const Tensor& a, const Tensor& b, Tensor* out, F f) {
  const T* pa = DataOf<T>(a);
  const T* pb = DataOf<T>(b);
  U* o = MutableDataOf<U>(out);
  const std::vector<int64_t> oa = Offsets(a.shape(), out->shape());
  const std::vector<int64_t> ob = Offsets(b.shape(), out->shape());
  for (size_t i = 0; i < oa.size(); ++i) {
    o[i] = static_cast<U>(f(static_cast<double>(pa[oa[i]]), static_cast<double>(pb[ob[i]])));
  }
}

template <typename T>
absl::Status BinaryTyped(const std::string& t, const Tensor& a, const Tensor& b, Tensor* out) {
  using P = float;  // predicates always produce float32 0/1
  if (t == "add") {
    BinaryLoop<T, T>(a, b, out, [](double x, double y) { return x + y; });
  } else if (t == "sub") {
    BinaryLoop<T, T>(a, b, out, [](double x, double y) { return x - y; });
  } else if (t == "mul") {
    BinaryLoop<T, T>(a, b, out, [](double x, double y) { return x * y; });
  } else if (t == "minimum") {
    BinaryLoop<T, T>(a, b, out, [](double x, double y) { return std::min(x, y); });
  } else if (t == "maximum") {
    BinaryLoop<T, T>(a, b, out, [](double x, double y) { return std::max(x, y); });
  } else if (t == "equal") {
    BinaryLoop<T, P>(a, b, out, [](double x, double y) { return x == y ? 1.0 : 0.0; });
  } else if (t == "less") {
    BinaryLoop<T, P>(a, b, out, [](double x, double y) { return x < y ? 1.0 : 0.0; });
  } else if (t == "greater") {
    BinaryLoop<T, P>(a, b, out, [](double x, double y) { return x > y ? 1.0 : 0.0; });
  } else if (t == "logical_and") {
    BinaryLoop<T, P>(a, b, out, [](double x, double y) { return x != 0 && y != 0 ? 1.0 : 0.0; });
  } else if (t == "logical_or") {
    BinaryLoop<T, P>(a, b, out, [](double x, double y) { return x != 0 || y != 0 ? 1.0 : 0.0; });
  } else if (std::is_same<T, int32_t>::value) {
    return absl::InvalidArgumentError(absl::StrCat(t, " needs float32, not int32"));
  } else if (t == "div") {
    BinaryLoop<T, T>(a, b, out, [](double x, double y) { return x / y; });
  } else if (t == "pow") {
    BinaryLoop<T, T>(a, b, out, [](double x, double y) { return std::pow(x, y); });
  } else {
    return absl::UnimplementedError(absl::StrCat("no binary kernel for ", t));
  }
  return absl::OkStatus();
}

// The operands of a binary op or where: the inputs, plus the scalar attribute as a 0-d tensor of
// the last input's dtype (first when scalar_first).
absl::StatusOr<std::vector<const Tensor*>> Operands(const v1::Op& op,
                                                    absl::Span<const Tensor* const> inputs,
                                                    int arity, Tensor* scalar) {
  const bool has_scalar = HasScalar(op);
  const size_t want = has_scalar ? arity - 1 : arity;
  RETURN_IF_ERROR(CheckInputs(inputs, want, want));
  std::vector<const Tensor*> operands(inputs.begin(), inputs.end());
  if (!has_scalar) return operands;
  ASSIGN_OR_RETURN(double v, ScalarAttr(op));
  *scalar = ScalarTensor(inputs.back()->dtype(), v);
  if (BoolAttrOr(op, "scalar_first", false) && arity == 2) {
    operands.insert(operands.begin(), scalar);
  } else {
    operands.push_back(scalar);
  }
  return operands;
}

absl::Status BinaryKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  Tensor scalar;
  ASSIGN_OR_RETURN(std::vector<const Tensor*> in, Operands(op, inputs, 2, &scalar));
  RETURN_IF_ERROR(CheckDimsIn(in[0]->shape(), "input 0", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(in[1]->shape(), "input 1", out->shape(), "the output"));
  const DType dtype = in[0]->dtype();
  const DType want = IsPredicate(op.type()) ? DType::kFloat32 : dtype;
  if (in[1]->dtype() != dtype || out->dtype() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs are ", DTypeName(dtype), " and ", DTypeName(in[1]->dtype()),
                     " and the output is ", DTypeName(out->dtype()), "; want ", DTypeName(want),
                     " out of two ", DTypeName(dtype), " inputs"));
  }
  return dtype == DType::kFloat32 ? BinaryTyped<float>(op.type(), *in[0], *in[1], out)
                                  : BinaryTyped<int32_t>(op.type(), *in[0], *in[1], out);
}

template <typename C, typename T>
void WhereLoop(const Tensor& c, const Tensor& x, const Tensor& y, Tensor* out) {
  const C* pc = DataOf<C>(c);
  const T* px = DataOf<T>(x);
  const T* py = DataOf<T>(y);
  T* o = MutableDataOf<T>(out);
  const std::vector<int64_t> oc = Offsets(c.shape(), out->shape());
  const std::vector<int64_t> ox = Offsets(x.shape(), out->shape());
  const std::vector<int64_t> oy = Offsets(y.shape(), out->shape());
  for (size_t i = 0; i < oc.size(); ++i) o[i] = pc[oc[i]] != C(0) ? px[ox[i]] : py[oy[i]];
}

absl::Status WhereKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  Tensor scalar;
  ASSIGN_OR_RETURN(std::vector<const Tensor*> in, Operands(op, inputs, 3, &scalar));
  const char* names[] = {"the condition", "x", "y"};
  for (int k = 0; k < 3; ++k) {
    RETURN_IF_ERROR(CheckDimsIn(in[k]->shape(), names[k], out->shape(), "the output"));
  }
  if (in[1]->dtype() != out->dtype() || in[2]->dtype() != out->dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("x and y must be ", DTypeName(out->dtype()), " like the output"));
  }
  const bool cf = in[0]->dtype() == DType::kFloat32;
  if (out->dtype() == DType::kFloat32) {
    cf ? WhereLoop<float, float>(*in[0], *in[1], *in[2], out)
       : WhereLoop<int32_t, float>(*in[0], *in[1], *in[2], out);
  } else {
    cf ? WhereLoop<float, int32_t>(*in[0], *in[1], *in[2], out)
       : WhereLoop<int32_t, int32_t>(*in[0], *in[1], *in[2], out);
  }
  return absl::OkStatus();
}

// ---- registration -------------------------------------------------------------------------

// Linearity (OpInfo::linear, for lazy partial sums): which inputs a partial sum may flow through.
// x * y in the one partial operand (or x * scalar).
bool LinearMul(const v1::Op& op, const std::vector<bool>& partial, const std::vector<DType>&,
               DType) {
  return partial.size() == 2 ? partial[0] != partial[1] : HasScalar(op);
}
// x / y in a partial x (y whole, or a scalar); never in the divisor.
bool LinearDiv(const v1::Op& op, const std::vector<bool>& partial, const std::vector<DType>&,
               DType) {
  const bool scalar_first = BoolAttrOr(op, "scalar_first", false);
  return partial[0] && !scalar_first && (partial.size() == 2 ? !partial[1] : HasScalar(op));
}
// x +/- y with both partial (a partial plus a whole tensor would count the whole one per addend).
bool LinearAddSub(const v1::Op& op, const std::vector<bool>& partial, const std::vector<DType>&,
                  DType) {
  return partial.size() == 2 && partial[0] && partial[1] && !HasScalar(op);
}
// A cast that keeps the dtype (float -> float).
bool LinearCast(const v1::Op&, const std::vector<bool>& partial, const std::vector<DType>& in,
                DType out) {
  return partial.size() == 1 && in[0] == out;
}
// where(c, x, y) in partial x and y (c whole), or where(c, x, 0).
bool LinearWhere(const v1::Op& op, const std::vector<bool>& partial, const std::vector<DType>&,
                 DType) {
  if (partial[0] || BoolAttrOr(op, "scalar_first", false)) return false;
  if (partial.size() == 3) return partial[1] && partial[2];
  if (partial.size() != 2 || !HasScalar(op)) return false;
  absl::StatusOr<double> s = ScalarAttr(op);
  return s.ok() && *s == 0.0;
}

OpInfo Linear(OpInfo info, LinearFn linear) {
  info.linear = linear;
  return info;
}

OpInfo Unary(const char* type, bool differentiable, const char* summary) {
  OpInfo info{type, OpFamily::kElementwise, 1, 1, differentiable, summary, "none"};
  info.infer = InferUnary;
  info.reference = UnaryKernel;
  return info;
}

OpInfo Binary(const char* type, bool differentiable, const char* summary) {
  OpInfo info{type,
              OpFamily::kElementwise,
              1,
              2,
              differentiable,
              absl::StrCat(summary, ", broadcast by dim name; y may be attrs.scalar"),
              "none"};
  info.infer = InferBinary;
  info.reference = BinaryKernel;
  return info;
}

std::vector<OpInfo> ElementwiseOps() {
  std::vector<OpInfo> ops = {
      Unary("exp", true, "e^x"),
      Unary("log", true, "natural log"),
      Unary("sqrt", true, "square root"),
      Unary("rsqrt", true, "1 / sqrt(x)"),
      Unary("square", true, "x * x"),
      Unary("tanh", true, "hyperbolic tangent"),
      Unary("sigmoid", true, "1 / (1 + e^-x)"),
      Unary("gelu", true, "x * Phi(x); attrs.approximate (default true): tanh form, else erf"),
      Unary("relu", true, "max(x, 0)"),
      Unary("abs", true, "|x|"),
      Unary("sign", false, "-1, 0 or 1"),
      Linear(Unary("neg", true, "-x"), &LinearInItsInput),
      Unary("reciprocal", true, "1 / x"),
      Linear(Unary("scale", true, "x * attrs.scalar"), &LinearInItsInput),
      Linear(Unary("cast", true, "to attrs.dtype (float32|int32): truncates, saturates, NaN -> 0"),
             &LinearCast),
      Linear(Binary("add", true, "x + y"), &LinearAddSub),
      Linear(Binary("sub", true, "x - y"), &LinearAddSub),
      Linear(Binary("mul", true, "x * y"), &LinearMul),
      Linear(Binary("div", true, "x / y"), &LinearDiv),
      Binary("minimum", true, "min(x, y)"),
      Binary("maximum", true, "max(x, y)"),
      Binary("pow", true, "x ^ y"),
      Binary("equal", false, "float32 1 where x == y, else 0"),
      Binary("less", false, "float32 1 where x < y, else 0"),
      Binary("greater", false, "float32 1 where x > y, else 0"),
      Binary("logical_and", false, "float32 1 where x != 0 and y != 0, else 0"),
      Binary("logical_or", false, "float32 1 where x != 0 or y != 0, else 0"),
  };
  OpInfo where{"where", OpFamily::kElementwise,
               2,       3,
               true,    "x where cond != 0, else y; broadcast by dim name; y may be attrs.scalar",
               "none"};
  where.infer = InferWhere;
  where.reference = WhereKernel;
  where.linear = &LinearWhere;
  ops.push_back(where);
  // Costs (core/ops/op_cost.h): the family default counts one FLOP per element; these count more.
  for (OpInfo& op : ops) {
    if (IsOneOf(op.type, {"exp", "log", "tanh", "sigmoid", "gelu", "pow"})) {
      op.cost = &PerOutputElementCost<kTranscendentalFlops>;
    } else if (IsOneOf(op.type, {"div", "sqrt", "rsqrt", "reciprocal"})) {
      op.cost = &PerOutputElementCost<kDivideFlops>;
    }
  }
  return ops;
}

const bool kRegistered = RegisterOps(ElementwiseOps());

}  // namespace
}  // namespace math
}  // namespace meshrt
