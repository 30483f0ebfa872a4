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

// ---- shape inference ----------------------------------------------------------------------

absl::StatusOr<TensorType> InferSame(const v1::Op&, const std::vector<TensorType>& in) {
  return in[0];
}

absl::StatusOr<TensorType> InferCast(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(DType to, CastTarget(op));
  return TensorType{in[0].shape, to};
}

absl::StatusOr<TensorType> InferScale(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(ScalarAttr(op).status());
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

// A binary op's output: the broadcast shape, of the inputs' dtype, or float32 0/1 for a
// predicate (kPredicate).
template <bool kPredicate>
absl::StatusOr<TensorType> InferBinary(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(CheckScalarForm(op, in, 2));
  if (in.size() == 2 && in[0].dtype != in[1].dtype) {
    return OpError(
        op, absl::StrCat("inputs '", op.inputs(0), "' (", DTypeName(in[0].dtype), ") and '",
                         op.inputs(1), "' (", DTypeName(in[1].dtype), ") have different dtypes"));
  }
  std::vector<Shape> shapes;
  for (const TensorType& t : in) shapes.push_back(t.shape);
  ASSIGN_OR_RETURN(Shape out, BroadcastShape(op, shapes));
  return TensorType{out, kPredicate ? DType::kFloat32 : in[0].dtype};
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

template <typename T, typename F>
void UnaryLoop(const Tensor& x, Tensor* out, F f) {
  const T* px = DataOf<T>(x);
  T* o = MutableDataOf<T>(out);
  const std::vector<int64_t> off = Offsets(x.shape(), out->shape());
  for (size_t i = 0; i < off.size(); ++i) {
    o[i] = static_cast<T>(f(static_cast<double>(px[off[i]])));
  }
}

// The checks every unary kernel makes: one input with the output's dims (in any order), and,
// unless the op casts, the output's dtype.
absl::Status CheckUnary(absl::Span<const Tensor* const> inputs, const Tensor& out, bool cast) {
  RETURN_IF_ERROR(CheckInputs(inputs, 1, 1));
  const Tensor& x = *inputs[0];
  RETURN_IF_ERROR(CheckDimsIn(x.shape(), "the input", out.shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(out.shape(), "the output", x.shape(), "the input"));
  if (!cast && x.dtype() != out.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("the input is ", DTypeName(x.dtype()),
                                                   " but the output is ", DTypeName(out.dtype())));
  }
  return absl::OkStatus();
}

// A unary kernel whose math reads attributes (gelu, scale): `f` made once per call.
template <typename F>
absl::Status UnaryWith(absl::Span<const Tensor* const> inputs, Tensor* out, F f) {
  RETURN_IF_ERROR(CheckUnary(inputs, *out, /*cast=*/false));
  if (inputs[0]->dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("needs float32, not ", DTypeName(inputs[0]->dtype())));
  }
  UnaryLoop<float>(*inputs[0], out, f);
  return absl::OkStatus();
}

absl::Status GeluKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  const bool approximate = BoolAttrOr(op, "approximate", true);
  return UnaryWith(inputs, out, [approximate](double v) { return Gelu(v, approximate); });
}

absl::Status ScaleKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  ASSIGN_OR_RETURN(double s, ScalarAttr(op));
  return UnaryWith(inputs, out, [s](double v) { return v * static_cast<float>(s); });
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

absl::Status CastKernel(const v1::Op&, absl::Span<const Tensor* const> inputs, Tensor* out) {
  RETURN_IF_ERROR(CheckUnary(inputs, *out, /*cast=*/true));
  return Cast(*inputs[0], out);
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

using BinaryMathFn = double (*)(double x, double y);

// o = f(a, b) in double, rounded to the output's dtype (float32 0/1 for a predicate).
template <typename T>
void BinaryTyped(BinaryMathFn f, bool predicate, const Tensor& a, const Tensor& b, Tensor* out) {
  if (predicate) {
    BinaryLoop<T, float>(a, b, out, f);
  } else {
    BinaryLoop<T, T>(a, b, out, f);
  }
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

absl::Status RunBinary(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out,
                       BinaryMathFn f, bool predicate) {
  Tensor scalar;
  ASSIGN_OR_RETURN(std::vector<const Tensor*> in, Operands(op, inputs, 2, &scalar));
  RETURN_IF_ERROR(CheckDimsIn(in[0]->shape(), "input 0", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(in[1]->shape(), "input 1", out->shape(), "the output"));
  const DType dtype = in[0]->dtype();
  const DType want = predicate ? DType::kFloat32 : dtype;
  if (in[1]->dtype() != dtype || out->dtype() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs are ", DTypeName(dtype), " and ", DTypeName(in[1]->dtype()),
                     " and the output is ", DTypeName(out->dtype()), "; want ", DTypeName(want),
                     " out of two ", DTypeName(dtype), " inputs"));
  }
  if (dtype == DType::kFloat32) {
    BinaryTyped<float>(f, predicate, *in[0], *in[1], out);
  } else {
    BinaryTyped<int32_t>(f, predicate, *in[0], *in[1], out);
  }
  return absl::OkStatus();
}

template <BinaryMathFn kF, bool kPredicate>
absl::Status BinaryKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  return RunBinary(op, inputs, out, kF, kPredicate);
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

// Costs (core/ops/op_cost.h): the family default counts one FLOP per element.
OpInfo Cost(OpInfo info, CostFn cost) {
  info.cost = cost;
  return info;
}
constexpr CostFn kTranscendental = &PerOutputElementCost<kTranscendentalFlops>;
constexpr CostFn kDivide = &PerOutputElementCost<kDivideFlops>;
constexpr InputDTypes kAny = InputDTypes::kAny;
constexpr InputDTypes kFloating = InputDTypes::kFloating;

// The per-element math of the unary ops (double; rounded once by the kernel).
double Exp(double v) { return std::exp(v); }
double Log(double v) { return std::log(v); }
double Sqrt(double v) { return std::sqrt(v); }
double Rsqrt(double v) { return 1.0 / std::sqrt(v); }
double Square(double v) { return v * v; }
double Tanh(double v) { return std::tanh(v); }
double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double Relu(double v) { return v > 0 ? v : 0.0; }
double Abs(double v) { return std::fabs(v); }
double SignOf(double v) { return Sign(v); }
double Neg(double v) { return -v; }
double Reciprocal(double v) { return 1.0 / v; }

// Unary ops whose math reads attributes, or casts.
OpInfo UnaryWithKernel(const char* type, const char* summary, InferFn infer, KernelFn kernel,
                       InputDTypes dtypes) {
  OpInfo info = UnaryOpInfo(type, true, summary, dtypes);
  info.infer = infer;
  info.reference = kernel;
  return info;
}

// The per-element math of the binary ops.
double Add(double x, double y) { return x + y; }
double Sub(double x, double y) { return x - y; }
double Mul(double x, double y) { return x * y; }
double Div(double x, double y) { return x / y; }
double Min(double x, double y) { return std::min(x, y); }
double Max(double x, double y) { return std::max(x, y); }
double Pow(double x, double y) { return std::pow(x, y); }
double Equal(double x, double y) { return x == y ? 1.0 : 0.0; }
double Less(double x, double y) { return x < y ? 1.0 : 0.0; }
double Greater(double x, double y) { return x > y ? 1.0 : 0.0; }
double And(double x, double y) { return x != 0 && y != 0 ? 1.0 : 0.0; }
double Or(double x, double y) { return x != 0 || y != 0 ? 1.0 : 0.0; }

// A binary op: y may be attrs.scalar; a predicate (kPredicate) gives float32 0/1.
template <BinaryMathFn kF, bool kPredicate = false>
OpInfo Binary(const char* type, bool differentiable, const char* summary,
              InputDTypes dtypes = kAny) {
  OpInfo info{type,
              OpFamily::kElementwise,
              1,
              2,
              differentiable,
              absl::StrCat(summary, ", broadcast by dim name; y may be attrs.scalar"),
              "none"};
  info.infer = &InferBinary<kPredicate>;
  info.reference = &BinaryKernel<kF, kPredicate>;
  info.input_dtypes = dtypes;
  return info;
}

std::vector<OpInfo> ElementwiseOps() {
  std::vector<OpInfo> ops = {
      Cost(UnaryOp<Exp>("exp", true, "e^x", kFloating), kTranscendental),
      Cost(UnaryOp<Log>("log", true, "natural log", kFloating), kTranscendental),
      Cost(UnaryOp<Sqrt>("sqrt", true, "square root", kFloating), kDivide),
      Cost(UnaryOp<Rsqrt>("rsqrt", true, "1 / sqrt(x)", kFloating), kDivide),
      UnaryOp<Square>("square", true, "x * x", kAny),
      Cost(UnaryOp<Tanh>("tanh", true, "hyperbolic tangent", kFloating), kTranscendental),
      Cost(UnaryOp<Sigmoid>("sigmoid", true, "1 / (1 + e^-x)", kFloating), kTranscendental),
      Cost(UnaryWithKernel("gelu",
                           "x * Phi(x); attrs.approximate (default true): tanh form, else erf",
                           &InferSame, &GeluKernel, kFloating),
           kTranscendental),
      UnaryOp<Relu>("relu", true, "max(x, 0)", kAny),
      UnaryOp<Abs>("abs", true, "|x|", kAny),
      UnaryOp<SignOf>("sign", false, "-1, 0 or 1", kAny),
      Linear(UnaryOp<Neg>("neg", true, "-x", kAny), &LinearInItsInput),
      Cost(UnaryOp<Reciprocal>("reciprocal", true, "1 / x", kFloating), kDivide),
      Linear(UnaryWithKernel("scale", "x * attrs.scalar", &InferScale, &ScaleKernel, kFloating),
             &LinearInItsInput),
      Linear(UnaryWithKernel("cast",
                             "to attrs.dtype (float32|int32): truncates, saturates, NaN -> 0",
                             &InferCast, &CastKernel, kAny),
             &LinearCast),
      Linear(Binary<Add>("add", true, "x + y"), &LinearAddSub),
      Linear(Binary<Sub>("sub", true, "x - y"), &LinearAddSub),
      Linear(Binary<Mul>("mul", true, "x * y"), &LinearMul),
      Cost(Linear(Binary<Div>("div", true, "x / y", kFloating), &LinearDiv), kDivide),
      Binary<Min>("minimum", true, "min(x, y)"),
      Binary<Max>("maximum", true, "max(x, y)"),
      Cost(Binary<Pow>("pow", true, "x ^ y", kFloating), kTranscendental),
      Binary<Equal, true>("equal", false, "float32 1 where x == y, else 0"),
      Binary<Less, true>("less", false, "float32 1 where x < y, else 0"),
      Binary<Greater, true>("greater", false, "float32 1 where x > y, else 0"),
      Binary<And, true>("logical_and", false, "float32 1 where x != 0 and y != 0, else 0"),
      Binary<Or, true>("logical_or", false, "float32 1 where x != 0 or y != 0, else 0"),
  };
  OpInfo where{"where", OpFamily::kElementwise,
               2,       3,
               true,    "x where cond != 0, else y; broadcast by dim name; y may be attrs.scalar",
               "none"};
  where.infer = InferWhere;
  where.reference = WhereKernel;
  where.linear = &LinearWhere;
  ops.push_back(where);
  return ops;
}

const bool kRegistered = RegisterOps(ElementwiseOps());

}  // namespace

absl::Status RunUnaryReference(const v1::Op&, absl::Span<const Tensor* const> inputs, Tensor* out,
                               UnaryMathFn f) {
  RETURN_IF_ERROR(CheckUnary(inputs, *out, /*cast=*/false));
  if (inputs[0]->dtype() == DType::kFloat32) {
    UnaryLoop<float>(*inputs[0], out, f);
  } else {
    UnaryLoop<int32_t>(*inputs[0], out, f);
  }
  return absl::OkStatus();
}

std::optional<absl::Status> RunFastUnary(absl::Span<const Tensor* const> inputs, Tensor* out,
                                         FloatLoopFn loop) {
  if (inputs.size() != 1 || inputs[0] == nullptr || inputs[0]->shape() != out->shape() ||
      inputs[0]->dtype() != DType::kFloat32 || out->dtype() != DType::kFloat32) {
    return std::nullopt;
  }
  loop(inputs[0]->f32(), out->f32(), out->num_elements());
  return absl::OkStatus();
}

OpInfo UnaryOpInfo(const char* type, bool differentiable, const char* summary,
                   InputDTypes dtypes) {
  OpInfo info{type, OpFamily::kElementwise, 1, 1, differentiable, summary, "none"};
  info.infer = &InferSame;
  info.input_dtypes = dtypes;
  return info;
}
}  // namespace math
}  // namespace meshrt
