// Named dimensions and shapes: the vocabulary of the mesh language.
//
// A Dim is (name, size). A Shape is an ordered list of Dims with distinct names, row-major (the last
// dim varies fastest). Shapes are values: cheap to copy, immutable through this API except by
// building new ones. Thread-compatible.
#ifndef MESHRT_CORE_IR_SHAPE_H_
#define MESHRT_CORE_IR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/tensor.pb.h"

namespace meshrt {

struct Dim {
  std::string name;
  int64_t size = 0;

  bool operator==(const Dim& o) const { return name == o.name && size == o.size; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
};

class Shape {
 public:
  // Most elements any shape made by Make/Parse/FromProto may have: 2^59, so that elements times
  // any dtype's size (<= 8 bytes) and sums of a few such byte counts still fit in int64.
  static constexpr int64_t kMaxElements = int64_t{1} << 59;

  Shape() = default;
  // Precondition (CHECKed): names are distinct. Use Shape::Make for untrusted input.
  Shape(std::initializer_list<Dim> dims);
  explicit Shape(std::vector<Dim> dims);

  // Validates untrusted dims: distinct, non-empty names; sizes >= 1; at most kMaxElements
  // elements (so element and byte counts of a made shape never overflow int64). InvalidArgument
  // otherwise, naming `what` (e.g. "tensor 'h'") and the offending dim.
  static absl::StatusOr<Shape> Make(std::vector<Dim> dims, absl::string_view what = "shape");
  // Parses "batch:8,d_model:16" (also ';' or whitespace as separators). "" is the scalar shape.
  static absl::StatusOr<Shape> Parse(absl::string_view text);
  static absl::StatusOr<Shape> FromProto(const v1::Shape& proto, absl::string_view what = "shape");
  v1::Shape ToProto() const;

  int rank() const { return static_cast<int>(dims_.size()); }
  const std::vector<Dim>& dims() const { return dims_; }
  const Dim& dim(int i) const { return dims_[i]; }
  // The product of the sizes. Fast and unchecked: for shapes made by Make/Parse/FromProto or
  // checked with CheckedNumElements (a product past int64 would wrap).
  int64_t num_elements() const;
  // The product of the sizes, InvalidArgument naming `what` and the dim where it passes
  // kMaxElements (or when a size is below 1) instead of overflowing.
  absl::StatusOr<int64_t> CheckedNumElements(absl::string_view what = "shape") const;
  // Index of the dim called `name`, or -1.
  int IndexOf(absl::string_view name) const;
  bool Contains(absl::string_view name) const { return IndexOf(name) >= 0; }
  // Row-major strides in elements, one per dim.
  std::vector<int64_t> Strides() const;
  std::vector<int64_t> Sizes() const;
  // "[batch:8, d_model:16]".
  std::string ToString() const;

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::vector<Dim> dims_;
};

// The product of `dims`' sizes when every size is >= 1 and the product stays <= `max`; else
// InvalidArgument naming `what`, the dim where the product passes `max` and `max`.
absl::StatusOr<int64_t> CheckedDimProduct(const std::vector<Dim>& dims, int64_t max,
                                          absl::string_view what);

// Parses "name:size" lists shared by shapes and meshes.
absl::StatusOr<std::vector<Dim>> ParseDimList(absl::string_view text);

}  // namespace meshrt

#endif  // MESHRT_CORE_IR_SHAPE_H_
