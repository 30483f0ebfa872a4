// Mesh, layout rules and tensor layouts.
//
// A Mesh is an ordered list of mesh dims (e.g. rows:2,cols:4); processors are numbered row-major,
// the last mesh dim varying fastest. LayoutRules map tensor dim names to mesh dim names. A
// TensorLayout says, for each dim of one tensor, which mesh axis splits it (or kReplicated).
// All are values; thread-compatible.
#ifndef MESHRT_CORE_IR_MESH_H_
#define MESHRT_CORE_IR_MESH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/shape.h"
#include "proto/mesh.pb.h"

namespace meshrt {

class Mesh {
 public:
  // Most processors any mesh may have, so that processor numbers fit in an int. A daemon's own cap
  // (RequestLimits::max_mesh_processors, core/ir/limits.h) is far lower and is checked first.
  static constexpr int64_t kMaxProcessors = INT32_MAX;

  Mesh() = default;  // the 1-processor mesh with no dims
  // Validates: distinct non-empty names, sizes >= 1, at most kMaxProcessors processors (the
  // product is overflow-checked). InvalidArgument naming the bad mesh dim. Allocates per dim only.
  static absl::StatusOr<Mesh> Make(std::vector<Dim> dims);
  // Parses "rows:2,cols:2".
  static absl::StatusOr<Mesh> Parse(absl::string_view text);
  static absl::StatusOr<Mesh> FromProto(const v1::Mesh& proto);
  v1::Mesh ToProto() const;

  int ndims() const { return static_cast<int>(dims_.size()); }
  const std::vector<Dim>& dims() const { return dims_; }
  int64_t size(int axis) const { return dims_[axis].size; }
  // Fits in an int: Make refuses larger meshes.
  int num_processors() const;
  int AxisOf(absl::string_view name) const;  // -1 when absent

  // Row-major conversions between processor number and coordinate.
  std::vector<int64_t> Coordinate(int pnum) const;
  int ProcessorNumber(const std::vector<int64_t>& coord) const;

  // The group of a collective over `axes` (sorted mesh axes) containing `coord`: its size, and
  // the rank of `coord` in it (row-major over `axes` in mesh order).
  int GroupSize(const std::vector<int>& axes) const;
  int RankInGroup(const std::vector<int>& axes, const std::vector<int64_t>& coord) const;
  // Processor numbers of the group over `axes` containing `coord`, in rank order.
  std::vector<int> GroupMembers(const std::vector<int>& axes,
                                const std::vector<int64_t>& coord) const;

  // "rows:2,cols:2".
  std::string ToString() const;

 private:
  std::vector<Dim> dims_;
};

inline constexpr int kReplicated = -1;

// Per tensor dim: the mesh axis splitting it, or kReplicated.
struct TensorLayout {
  std::vector<int> mesh_axis;

  bool operator==(const TensorLayout& o) const { return mesh_axis == o.mesh_axis; }
  bool operator!=(const TensorLayout& o) const { return !(*this == o); }
  bool IsFullyReplicated() const;
  v1::TensorLayout ToProto() const;
  static TensorLayout FromProto(const v1::TensorLayout& proto);
  // "[batch:rows, d_model:-]" for the given shape and mesh.
  std::string ToString(const Shape& shape, const Mesh& mesh) const;
};

class LayoutRules {
 public:
  LayoutRules() = default;
  // Validates: each tensor dim maps to one mesh dim; mesh dims must exist in `mesh`.
  // InvalidArgument naming the rule and the known mesh dims.
  static absl::StatusOr<LayoutRules> Make(const std::vector<std::pair<std::string, std::string>>& rules,
                                          const Mesh& mesh);
  // Parses "batch:rows,hidden:cols" against `mesh`.
  static absl::StatusOr<LayoutRules> Parse(absl::string_view text, const Mesh& mesh);
  static absl::StatusOr<LayoutRules> FromProto(const v1::LayoutRules& proto, const Mesh& mesh);
  v1::LayoutRules ToProto() const;

  // Mesh axis that tensor dims called `dim_name` are split over, or kReplicated.
  int MeshAxisFor(absl::string_view dim_name) const;
  // The layout the rules give a shape. Does not check validity (see CheckLayout).
  TensorLayout LayoutFor(const Shape& shape) const;
  const std::map<std::string, std::string>& rules() const { return rules_; }
  std::string ToString() const;

 private:
  std::map<std::string, std::string> rules_;  // tensor dim -> mesh dim
  std::map<std::string, int> axis_;           // tensor dim -> mesh axis
};

// Checks that `layout` is valid for `shape` on `mesh`: no mesh axis splits two dims, and each split
// dim's size divides by its mesh dim's size. `tensor`, `op` and `op_type` name the tensor and the op
// that made it in errors, which are
// InvalidArgument and say how to fix the rules.
absl::Status CheckLayout(const Shape& shape, const TensorLayout& layout, const Mesh& mesh,
                         absl::string_view tensor, absl::string_view op,
                         absl::string_view op_type = "");

// The shape of one processor's slice: split dims divided by their mesh dim size.
Shape SliceShape(const Shape& shape, const TensorLayout& layout, const Mesh& mesh);
// Where the slice held at `coord` starts, per tensor dim (element offsets).
std::vector<int64_t> SliceBegin(const Shape& shape, const TensorLayout& layout, const Mesh& mesh,
                                const std::vector<int64_t>& coord);

}  // namespace meshrt

#endif  // MESHRT_CORE_IR_MESH_H_
