// Tensor: a dense, row-major value with a named Shape and a dtype (float32 or int32). Used for whole
// (logical) tensors in the reference interpreter and for slices on workers.
//
// A Tensor owns its storage (a std::vector). Copying copies the data. Thread-compatible.
#ifndef MESHRT_CORE_IR_TENSOR_H_
#define MESHRT_CORE_IR_TENSOR_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/ir/shape.h"
#include "proto/tensor.pb.h"

namespace meshrt {

enum class DType { kFloat32, kInt32 };

namespace internal {
// An allocator whose value-less construct leaves elements default-initialised (for float and
// int: uninitialised), so a buffer a kernel overwrites anyway is not zero-filled first.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
}  // namespace internal

std::string DTypeName(DType t);
absl::StatusOr<DType> DTypeFromProto(v1::DType t);
v1::DType DTypeToProto(DType t);

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor.
  Tensor(DType dtype, Shape shape);
  // A tensor whose elements are unspecified until written: for outputs a kernel overwrites whole
  // (KernelRunner::Run's contract), saving the zero-fill and its page faults.
  static Tensor Uninitialized(DType dtype, Shape shape);
  // The same, reusing `storage`'s memory when it has `dtype` and room for the elements (else
  // allocating): for recycling buffers without a fresh allocation and its page faults.
  static Tensor UninitializedFrom(Tensor storage, DType dtype, Shape shape);
  static Tensor Float(Shape shape, std::vector<float> values);  // CHECKs the element count
  static Tensor Int(Shape shape, std::vector<int32_t> values);  // CHECKs the element count

  // Accepts either `content` (raw little-endian bytes) or the repeated value fields. Errors name
  // `what` and say which count or dtype is wrong.
  static absl::StatusOr<Tensor> FromProto(const v1::TensorValue& proto,
                                          absl::string_view what = "tensor");
  // Writes `content` (raw bytes).
  v1::TensorValue ToProto() const;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return shape_.num_elements(); }

  // Typed access. Precondition (CHECKed): the dtype matches.
  float* f32();
  const float* f32() const;
  int32_t* i32();
  const int32_t* i32() const;
  absl::Span<const float> floats() const { return absl::MakeConstSpan(f32(), num_elements()); }
  absl::Span<const int32_t> ints() const { return absl::MakeConstSpan(i32(), num_elements()); }

  // Same data viewed with another shape of the same element count (CHECKed).
  Tensor Reshaped(Shape shape) const;

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::vector<float, internal::DefaultInitAllocator<float>> f32_;
  std::vector<int32_t, internal::DefaultInitAllocator<int32_t>> i32_;
};

// Largest |a-b| / max(1, |b|) over elements, or +inf when shapes or dtypes differ. For tests and the
// demo's comparison with the reference interpreter.
double MaxRelativeError(const Tensor& a, const Tensor& b);

// *sum += addend, element by element. The caller guarantees the same dtype and element count
// (e.g. the addends of a partial-sum variable's slice).
void AddInto(const Tensor& addend, Tensor* sum);

}  // namespace meshrt

#endif  // MESHRT_CORE_IR_TENSOR_H_
