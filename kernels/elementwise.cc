#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ops/reference_kernels.h"
#include "kernels/fast_math.h"
#include "kernels/transpose.h"
#include "util/status_macros.h"

namespace meshrt {
namespace kernels {
namespace {

// The operators are types so each loop below is instantiated (and vectorised) per operator.
#define MESHRT_BINARY_OP(Name, expr) \
  struct Name {                      \
    template <typename T>            \
    static auto Apply(T x, T y) {    \
      return expr;                   \
    }                                \
  }
MESHRT_BINARY_OP(Add, x + y);
MESHRT_BINARY_OP(Sub, x - y);
MESHRT_BINARY_OP(Mul, x* y);
MESHRT_BINARY_OP(Div, x / y);
MESHRT_BINARY_OP(Min, std::min(x, y));
MESHRT_BINARY_OP(Max, std::max(x, y));
MESHRT_BINARY_OP(Pow, std::pow(x, y));
MESHRT_BINARY_OP(Equal, x == y);
MESHRT_BINARY_OP(Less, x < y);
MESHRT_BINARY_OP(Greater, x > y);
MESHRT_BINARY_OP(And, x != T(0) && y != T(0));
MESHRT_BINARY_OP(Or, x != T(0) || y != T(0));
#undef MESHRT_BINARY_OP

// One output row of n elements; sa/sb are the operands' strides along it (0 = broadcast scalar).
template <typename Op, typename T, typename U>
void Row(const T* a, int64_t sa, const T* b, int64_t sb, U* o, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t j = 0; j < n; ++j) o[j] = static_cast<U>(Op::Apply(a[j], b[j]));
  } else if (sa == 1 && sb == 0) {
    const T y = *b;
    for (int64_t j = 0; j < n; ++j) o[j] = static_cast<U>(Op::Apply(a[j], y));
  } else if (sa == 0 && sb == 1) {
    const T x = *a;
    for (int64_t j = 0; j < n; ++j) o[j] = static_cast<U>(Op::Apply(x, b[j]));
  } else {  // a transposed operand: strided reads, still no index arithmetic beyond j * s
    for (int64_t j = 0; j < n; ++j) o[j] = static_cast<U>(Op::Apply(a[j * sa], b[j * sb]));
  }
}

// Splits the fused index space of `shapes` (operands, then the output last) into an outer loop
// and a contiguous-or-strided innermost row, calling row(offsets, inner strides, n).
template <typename RowFn>
void ForEachRow(const std::vector<Shape>& operands, const Shape& os, RowFn row) {
  std::vector<std::vector<int64_t>> strides;
  for (const Shape& s : operands) strides.push_back(StridesByName(s, os));
  strides.push_back(os.Strides());
  const FusedSpace f = Fuse(os.Sizes(), strides);
  const int r = static_cast<int>(f.sizes.size());
  const size_t k = strides.size();
  if (r == 0) {  // one element (every dim has size 1)
    row(std::vector<int64_t>(k, 0), std::vector<int64_t>(k, 0), int64_t{1});
    return;
  }
  std::vector<int64_t> outer_sizes(f.sizes.begin(), f.sizes.end() - 1);
  std::vector<std::vector<int64_t>> outer_strides;
  std::vector<int64_t> inner(k);
  for (size_t i = 0; i < k; ++i) {
    outer_strides.emplace_back(f.strides[i].begin(), f.strides[i].end() - 1);
    inner[i] = f.strides[i][r - 1];
  }
  std::vector<int64_t> offsets(k);
  for (StridedIterator it(outer_sizes, outer_strides); !it.done(); it.Next()) {
    for (size_t i = 0; i < k; ++i) offsets[i] = it.offset(static_cast<int>(i));
    row(offsets, inner, f.sizes[r - 1]);
  }
}

template <typename Op, typename T, typename U>
void BinaryLoop(const T* a, const Shape& as, const T* b, const Shape& bs, U* o, const Shape& os) {
  if (os.num_elements() == 0) return;
  if (as == os && bs == os) {
    Row<Op>(a, 1, b, 1, o, os.num_elements());
    return;
  }
  ForEachRow({as, bs}, os,
             [&](const std::vector<int64_t>& off, const std::vector<int64_t>& s, int64_t n) {
               Row<Op>(a + off[0], s[0], b + off[1], s[1], o + off[2], n);
             });
}

template <typename T, typename U>
void Arithmetic(BinaryOp op, const T* a, const Shape& as, const T* b, const Shape& bs, U* o,
                const Shape& os) {
  switch (op) {
    case BinaryOp::kAdd:
      return BinaryLoop<Add>(a, as, b, bs, o, os);
    case BinaryOp::kSub:
      return BinaryLoop<Sub>(a, as, b, bs, o, os);
    case BinaryOp::kMul:
      return BinaryLoop<Mul>(a, as, b, bs, o, os);
    case BinaryOp::kDiv:
      return BinaryLoop<Div>(a, as, b, bs, o, os);
    case BinaryOp::kMinimum:
      return BinaryLoop<Min>(a, as, b, bs, o, os);
    case BinaryOp::kMaximum:
      return BinaryLoop<Max>(a, as, b, bs, o, os);
    case BinaryOp::kPow:
      return BinaryLoop<Pow>(a, as, b, bs, o, os);
    default:
      return;
  }
}

template <typename T>
void Predicate(BinaryOp op, const T* a, const Shape& as, const T* b, const Shape& bs, float* o,
               const Shape& os) {
  switch (op) {
    case BinaryOp::kEqual:
      return BinaryLoop<Equal>(a, as, b, bs, o, os);
    case BinaryOp::kLess:
      return BinaryLoop<Less>(a, as, b, bs, o, os);
    case BinaryOp::kGreater:
      return BinaryLoop<Greater>(a, as, b, bs, o, os);
    case BinaryOp::kLogicalAnd:
      return BinaryLoop<And>(a, as, b, bs, o, os);
    case BinaryOp::kLogicalOr:
      return BinaryLoop<Or>(a, as, b, bs, o, os);
    default:
      return;
  }
}

bool IsPredicate(BinaryOp op) {
  return op == BinaryOp::kEqual || op == BinaryOp::kLess || op == BinaryOp::kGreater ||
         op == BinaryOp::kLogicalAnd || op == BinaryOp::kLogicalOr;
}

template <typename T>
const T* Ptr(const Tensor& t);
template <>
const float* Ptr<float>(const Tensor& t) {
  return t.f32();
}
template <>
const int32_t* Ptr<int32_t>(const Tensor& t) {
  return t.i32();
}
template <typename T>
T* MutablePtr(Tensor* t);
template <>
float* MutablePtr<float>(Tensor* t) {
  return t->f32();
}
template <>
int32_t* MutablePtr<int32_t>(Tensor* t) {
  return t->i32();
}

template <typename C, typename T>
void WhereLoop(const Tensor& c, const Tensor& x, const Tensor& y, Tensor* out) {
  const C* pc = Ptr<C>(c);
  const T* px = Ptr<T>(x);
  const T* py = Ptr<T>(y);
  T* po = MutablePtr<T>(out);
  if (out->num_elements() == 0) return;
  ForEachRow({c.shape(), x.shape(), y.shape()}, out->shape(),
             [&](const std::vector<int64_t>& off, const std::vector<int64_t>& s, int64_t n) {
               const C* cc = pc + off[0];
               const T* xx = px + off[1];
               const T* yy = py + off[2];
               T* oo = po + off[3];
               if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
                 for (int64_t j = 0; j < n; ++j) oo[j] = cc[j] != C(0) ? xx[j] : yy[j];
               } else {
                 for (int64_t j = 0; j < n; ++j) {
                   oo[j] = cc[j * s[0]] != C(0) ? xx[j * s[1]] : yy[j * s[2]];
                 }
               }
             });
}

}  // namespace

absl::Status Binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor* out) {
  const DType want = IsPredicate(op) ? DType::kFloat32 : a.dtype();
  if (a.dtype() != b.dtype() || out->dtype() != want) {
    return absl::InvalidArgumentError(absl::StrCat("inputs are ", DTypeName(a.dtype()), " and ",
                                                   DTypeName(b.dtype()), " but the output is ",
                                                   DTypeName(out->dtype())));
  }
  RETURN_IF_ERROR(CheckDimsIn(a.shape(), "input 0", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(b.shape(), "input 1", out->shape(), "the output"));
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const Shape& os = out->shape();
  if (a.dtype() == DType::kFloat32) {
    if (IsPredicate(op)) {
      Predicate(op, a.f32(), as, b.f32(), bs, out->f32(), os);
    } else {
      Arithmetic(op, a.f32(), as, b.f32(), bs, out->f32(), os);
    }
    return absl::OkStatus();
  }
  if (IsPredicate(op)) {
    Predicate(op, a.i32(), as, b.i32(), bs, out->f32(), os);
    return absl::OkStatus();
  }
  if (op == BinaryOp::kDiv || op == BinaryOp::kPow) {
    return absl::UnimplementedError("div and pow support float32 only");
  }
  Arithmetic(op, a.i32(), as, b.i32(), bs, out->i32(), os);
  return absl::OkStatus();
}

absl::Status Where(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor* out) {
  if (x.dtype() != out->dtype() || y.dtype() != out->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("x is ", DTypeName(x.dtype()), " and y is ",
                                                   DTypeName(y.dtype()), " but the output is ",
                                                   DTypeName(out->dtype())));
  }
  RETURN_IF_ERROR(CheckDimsIn(cond.shape(), "the condition", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(x.shape(), "x", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(y.shape(), "y", out->shape(), "the output"));
  const bool cf = cond.dtype() == DType::kFloat32;
  if (out->dtype() == DType::kFloat32) {
    cf ? WhereLoop<float, float>(cond, x, y, out) : WhereLoop<int32_t, float>(cond, x, y, out);
  } else {
    cf ? WhereLoop<float, int32_t>(cond, x, y, out) : WhereLoop<int32_t, int32_t>(cond, x, y, out);
  }
  return absl::OkStatus();
}

absl::Status Unary(UnaryOp op, float scalar, const Tensor& x, Tensor* out) {
  if (x.dtype() != DType::kFloat32 || out->dtype() != DType::kFloat32) {
    return absl::UnimplementedError("the fast unary kernels take float32 only");
  }
  RETURN_IF_ERROR(CheckDimsIn(x.shape(), "the input", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(out->shape(), "the output", x.shape(), "the input"));
  const int64_t n = out->num_elements();
  float* o = out->f32();
  const float* in = x.f32();
  if (x.shape() != out->shape()) {
    // Another dim order: permute first, then apply in place (one extra pass, no per-element math).
    PermuteCopy(in, x.shape(), o, out->shape());
    in = o;
  }
  auto apply = [&](auto f) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(in[i]);
  };
  switch (op) {
    case UnaryOp::kRelu:
      apply([](float v) { return v > 0.0f ? v : 0.0f; });
      break;
    case UnaryOp::kExp:
      ExpArray(in, 0.0f, o, n);
      break;
    case UnaryOp::kNeg:
      apply([](float v) { return -v; });
      break;
    case UnaryOp::kScale:
      apply([scalar](float v) { return v * scalar; });
      break;
    case UnaryOp::kLog:
      apply([](float v) { return std::log(v); });
      break;
    case UnaryOp::kSqrt:
      apply([](float v) { return std::sqrt(v); });
      break;
    case UnaryOp::kRsqrt:
      apply([](float v) { return 1.0f / std::sqrt(v); });
      break;
    case UnaryOp::kSquare:
      apply([](float v) { return v * v; });
      break;
    case UnaryOp::kTanh:
      apply([](float v) { return std::tanh(v); });
      break;
    case UnaryOp::kSigmoid:
      SigmoidArray(in, o, n);
      break;
    case UnaryOp::kGelu:
      apply([](float v) {
        const float k = 0.7978845608028654f;  // sqrt(2 / pi)
        return 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
      });
      break;
    case UnaryOp::kGeluErf:
      apply([](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); });
      break;
    case UnaryOp::kAbs:
      apply([](float v) { return std::fabs(v); });
      break;
    case UnaryOp::kSign:
      apply([](float v) { return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : 0.0f; });
      break;
    case UnaryOp::kReciprocal:
      apply([](float v) { return 1.0f / v; });
      break;
  }
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace meshrt
