#include "core/ir/tensor.h"
#include <climits>
#include <cstdlib>
#include <algorithm>

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "util/logging.h"

namespace meshrt {

std::string DTypeName(DType t) { return t == DType::kFloat32 ? "float32" : "int32"; }

absl::StatusOr<DType> DTypeFromProto(v1::DType t) {
  switch (t) {
    case v1::DT_FLOAT32:
      return DType::kFloat32;
    case v1::DT_INT32:
      return DType::kInt32;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unsupported dtype ", v1::DType_Name(t),
                                                     "; use DT_FLOAT32 or DT_INT32"));
  }
}

v1::DType DTypeToProto(DType t) { return t == DType::kFloat32 ? v1::DT_FLOAT32 : v1::DT_INT32; }

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  if (dtype_ == DType::kFloat32) {
    f32_.assign(shape_.num_elements(), 0.0f);
  } else {
    i32_.assign(shape_.num_elements(), 0);
  }
}

namespace {

// Tests set MESHRT_POISON_UNINITIALIZED=1 (.bazelrc): then uninitialized elements are NaN /
// INT32_MIN, so a kernel that leaves any of them unwritten fails its comparison instead of passing
// on memory that happened to be zero (or to hold a recycled buffer's old values).
bool PoisonUninitialized() {
  static const bool poison = [] {
    const char* v = std::getenv("MESHRT_POISON_UNINITIALIZED");
    return v != nullptr && std::string(v) == "1";
  }();
  return poison;
}

}  // namespace

Tensor Tensor::Uninitialized(DType dtype, Shape shape) {
  return UninitializedFrom(Tensor(), dtype, std::move(shape));
}

Tensor Tensor::UninitializedFrom(Tensor storage, DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const int64_t n = t.shape_.num_elements();
  if (dtype == DType::kFloat32) {
    if (storage.dtype_ == dtype) t.f32_ = std::move(storage.f32_);
    t.f32_.resize(n);  // default-initialised: no fill
    if (PoisonUninitialized()) std::fill(t.f32_.begin(), t.f32_.end(), std::nanf(""));
  } else {
    if (storage.dtype_ == dtype) t.i32_ = std::move(storage.i32_);
    t.i32_.resize(n);
    if (PoisonUninitialized()) std::fill(t.i32_.begin(), t.i32_.end(), INT32_MIN);
  }
  return t;
}

Tensor Tensor::Float(Shape shape, std::vector<float> values) {
  MESHRT_CHECK(static_cast<int64_t>(values.size()) == shape.num_elements(), shape.ToString());
  Tensor t;
  t.dtype_ = DType::kFloat32;
  t.shape_ = std::move(shape);
  t.f32_.assign(values.begin(), values.end());
  return t;
}

Tensor Tensor::Int(Shape shape, std::vector<int32_t> values) {
  MESHRT_CHECK(static_cast<int64_t>(values.size()) == shape.num_elements(), shape.ToString());
  Tensor t;
  t.dtype_ = DType::kInt32;
  t.shape_ = std::move(shape);
  t.i32_.assign(values.begin(), values.end());
  return t;
}

absl::StatusOr<Tensor> Tensor::FromProto(const v1::TensorValue& proto, absl::string_view what) {
  auto dtype = DTypeFromProto(proto.dtype());
  if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", dtype.status().message()));
  auto shape = Shape::FromProto(proto.shape(), what);
  if (!shape.ok()) return shape.status();
  Tensor t(*dtype, *shape);
  const int64_t n = t.num_elements();
  const int64_t value_count =
      *dtype == DType::kFloat32 ? proto.float_val_size() : proto.int_val_size();
  if (!proto.content().empty()) {
    if (static_cast<int64_t>(proto.content().size()) != n * 4) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": content has ", proto.content().size(),
                                                     " bytes but shape ", shape->ToString(),
                                                     " needs ", n * 4));
    }
    void* dst = *dtype == DType::kFloat32 ? static_cast<void*>(t.f32())
                                          : static_cast<void*>(t.i32());
    std::memcpy(dst, proto.content().data(), n * 4);
  } else if (value_count == n) {
    for (int64_t i = 0; i < n; ++i) {
      if (*dtype == DType::kFloat32) {
        t.f32()[i] = proto.float_val(i);
      } else {
        t.i32()[i] = proto.int_val(i);
      }
    }
  } else if (value_count == 1) {  // one value fills the tensor, as in TensorFlow's TensorProto
    for (int64_t i = 0; i < n; ++i) {
      if (*dtype == DType::kFloat32) {
        t.f32()[i] = proto.float_val(0);
      } else {
        t.i32()[i] = proto.int_val(0);
      }
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(what, ": has ", value_count,
                                                   " values but shape ", shape->ToString(),
                                                   " needs ", n, " (or 1 to fill)"));
  }
  return t;
}

v1::TensorValue Tensor::ToProto() const {
  v1::TensorValue p;
  p.set_dtype(DTypeToProto(dtype_));
  *p.mutable_shape() = shape_.ToProto();
  const void* src = dtype_ == DType::kFloat32 ? static_cast<const void*>(f32_.data())
                                              : static_cast<const void*>(i32_.data());
  p.set_content(static_cast<const char*>(src), num_elements() * 4);
  return p;
}

float* Tensor::f32() {
  MESHRT_CHECK(dtype_ == DType::kFloat32, "tensor is ", DTypeName(dtype_));
  return f32_.data();
}
const float* Tensor::f32() const {
  MESHRT_CHECK(dtype_ == DType::kFloat32, "tensor is ", DTypeName(dtype_));
  return f32_.data();
}
int32_t* Tensor::i32() {
  MESHRT_CHECK(dtype_ == DType::kInt32, "tensor is ", DTypeName(dtype_));
  return i32_.data();
}
const int32_t* Tensor::i32() const {
  MESHRT_CHECK(dtype_ == DType::kInt32, "tensor is ", DTypeName(dtype_));
  return i32_.data();
}

Tensor Tensor::Reshaped(Shape shape) const {
  MESHRT_CHECK(shape.num_elements() == num_elements(), shape.ToString(), " vs ",
               shape_.ToString());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void AddInto(const Tensor& addend, Tensor* sum) {
  const int64_t n = sum->num_elements();
  if (sum->dtype() == DType::kFloat32) {
    const float* a = addend.f32();
    float* s = sum->f32();
    for (int64_t i = 0; i < n; ++i) s[i] += a[i];
  } else {
    const int32_t* a = addend.i32();
    int32_t* s = sum->i32();
    for (int64_t i = 0; i < n; ++i) s[i] += a[i];
  }
}

double MaxRelativeError(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    return std::numeric_limits<double>::infinity();
  }
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    double x = a.dtype() == DType::kFloat32 ? a.f32()[i] : a.i32()[i];
    double y = b.dtype() == DType::kFloat32 ? b.f32()[i] : b.i32()[i];
    if (std::isnan(x) != std::isnan(y)) return std::numeric_limits<double>::infinity();
    if (std::isnan(x)) continue;
    worst = std::max(worst, std::fabs(x - y) / std::max(1.0, std::fabs(y)));
  }
  return worst;
}

}  // namespace meshrt
