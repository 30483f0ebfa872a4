#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/reference_kernels.h"
#include "core/status_macros.h"
#include "kernels/transpose.h"

namespace meshrt {
namespace kernels {
namespace {

// The operators are types so each loop below is instantiated (and vectorised) per operator.
struct Add {
  template <typename T>
  static T Apply(T x, T y) {
    return x + y;
  }
};
struct Sub {
  template <typename T>
  static T Apply(T x, T y) {
    return x - y;
  }
};
struct Mul {
  template <typename T>
  static T Apply(T x, T y) {
    return x * y;
  }
};
struct Div {
  template <typename T>
  static T Apply(T x, T y) {
    return x / y;
  }
};
struct Min {
  template <typename T>
  static T Apply(T x, T y) {
    return std::min(x, y);
  }
};
struct Max {
  template <typename T>
  static T Apply(T x, T y) {
    return std::max(x, y);
  }
};

// One output row of n elements; sa/sb are the operands' strides along it (0 = broadcast scalar).
template <typename Op, typename T>
void Row(const T* a, int64_t sa, const T* b, int64_t sb, T* o, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t j = 0; j < n; ++j) o[j] = Op::Apply(a[j], b[j]);
  } else if (sa == 1 && sb == 0) {
    const T y = *b;
    for (int64_t j = 0; j < n; ++j) o[j] = Op::Apply(a[j], y);
  } else if (sa == 0 && sb == 1) {
    const T x = *a;
    for (int64_t j = 0; j < n; ++j) o[j] = Op::Apply(x, b[j]);
  } else {  // a transposed operand: strided reads, still no index arithmetic beyond j * s
    for (int64_t j = 0; j < n; ++j) o[j] = Op::Apply(a[j * sa], b[j * sb]);
  }
}

template <typename Op, typename T>
void BinaryLoop(const T* a, const Shape& as, const T* b, const Shape& bs, T* o, const Shape& os) {
  if (as == os && bs == os) {
    Row<Op>(a, 1, b, 1, o, os.num_elements());
    return;
  }
  const FusedSpace f =
      Fuse(os.Sizes(), {StridesByName(as, os), StridesByName(bs, os), os.Strides()});
  const int r = static_cast<int>(f.sizes.size());
  if (r == 0) {
    o[0] = Op::Apply(a[0], b[0]);
    return;
  }
  std::vector<int64_t> outer_sizes(f.sizes.begin(), f.sizes.end() - 1);
  std::vector<std::vector<int64_t>> outer_strides;
  for (const auto& s : f.strides) outer_strides.emplace_back(s.begin(), s.end() - 1);
  const int64_t n = f.sizes[r - 1];
  const int64_t sa = f.strides[0][r - 1];
  const int64_t sb = f.strides[1][r - 1];
  for (StridedIterator it(outer_sizes, outer_strides); !it.done(); it.Next()) {
    Row<Op>(a + it.offset(0), sa, b + it.offset(1), sb, o + it.offset(2), n);
  }
}

template <typename T>
void Dispatch(BinaryOp op, const T* a, const Shape& as, const T* b, const Shape& bs, T* o,
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
  }
}

}  // namespace

absl::Status Binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor* out) {
  if (a.dtype() != out->dtype() || b.dtype() != out->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("inputs are ", DTypeName(a.dtype()), " and ",
                                                   DTypeName(b.dtype()), " but the output is ",
                                                   DTypeName(out->dtype())));
  }
  RETURN_IF_ERROR(CheckDimsIn(a.shape(), "input 0", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(b.shape(), "input 1", out->shape(), "the output"));
  if (out->dtype() == DType::kFloat32) {
    Dispatch(op, a.f32(), a.shape(), b.f32(), b.shape(), out->f32(), out->shape());
    return absl::OkStatus();
  }
  if (op == BinaryOp::kDiv) return absl::UnimplementedError("div supports float32 only");
  Dispatch(op, a.i32(), a.shape(), b.i32(), b.shape(), out->i32(), out->shape());
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
  switch (op) {
    case UnaryOp::kRelu:
      for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
      break;
    case UnaryOp::kExp:
      for (int64_t i = 0; i < n; ++i) o[i] = std::exp(in[i]);
      break;
    case UnaryOp::kNeg:
      for (int64_t i = 0; i < n; ++i) o[i] = -in[i];
      break;
    case UnaryOp::kScale:
      for (int64_t i = 0; i < n; ++i) o[i] = in[i] * scalar;
      break;
  }
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace meshrt
