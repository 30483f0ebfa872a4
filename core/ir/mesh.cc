#include "core/ir/mesh.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/logging.h"

namespace meshrt {

absl::StatusOr<Mesh> Mesh::Make(std::vector<Dim> dims) {
  std::set<std::string> names;
  for (const Dim& d : dims) {
    if (d.name.empty()) return absl::InvalidArgumentError("mesh dim with an empty name");
    if (d.size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh dim '", d.name, "' has size ", d.size, "; sizes must be >= 1"));
    }
    if (!names.insert(d.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("mesh repeats dim '", d.name, "'"));
    }
  }
  absl::StatusOr<int64_t> n = CheckedDimProduct(dims, kMaxProcessors, "mesh");
  if (!n.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(n.status().message(), " (a mesh has at most ",
                                                   kMaxProcessors, " processors)"));
  }
  Mesh m;
  m.dims_ = std::move(dims);
  return m;
}

absl::StatusOr<Mesh> Mesh::Parse(absl::string_view text) {
  auto dims = ParseDimList(text);
  if (!dims.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("mesh '", text, "': ", dims.status().message()));
  }
  return Make(*std::move(dims));
}

absl::StatusOr<Mesh> Mesh::FromProto(const v1::Mesh& proto) {
  std::vector<Dim> dims;
  for (const v1::Dim& d : proto.dims()) dims.push_back(Dim{d.name(), d.size()});
  return Make(std::move(dims));
}

v1::Mesh Mesh::ToProto() const {
  v1::Mesh p;
  *p.mutable_dims() = Shape(dims_).ToProto().dims();
  return p;
}

int Mesh::num_processors() const {
  int64_t n = 1;
  for (const Dim& d : dims_) n *= d.size;  // <= kMaxProcessors: Make checked the product
  return static_cast<int>(n);
}

int Mesh::AxisOf(absl::string_view name) const {
  for (int i = 0; i < ndims(); ++i) {
    if (dims_[i].name == name) return i;
  }
  return -1;
}

std::vector<int64_t> Mesh::Coordinate(int pnum) const {
  std::vector<int64_t> coord(dims_.size());
  for (int i = ndims() - 1; i >= 0; --i) {
    coord[i] = pnum % dims_[i].size;
    pnum /= dims_[i].size;
  }
  return coord;
}

int Mesh::ProcessorNumber(const std::vector<int64_t>& coord) const {
  int64_t p = 0;
  for (int i = 0; i < ndims(); ++i) p = p * dims_[i].size + coord[i];
  return static_cast<int>(p);
}

int Mesh::GroupSize(const std::vector<int>& axes) const {
  int64_t n = 1;
  for (int a : axes) n *= dims_[a].size;
  return static_cast<int>(n);
}

int Mesh::RankInGroup(const std::vector<int>& axes, const std::vector<int64_t>& coord) const {
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  int64_t r = 0;
  for (int a : sorted) r = r * dims_[a].size + coord[a];
  return static_cast<int>(r);
}

std::vector<int> Mesh::GroupMembers(const std::vector<int>& axes,
                                    const std::vector<int64_t>& coord) const {
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  const int g = GroupSize(sorted);
  std::vector<int> members;
  for (int r = 0; r < g; ++r) {
    std::vector<int64_t> c = coord;
    int rest = r;
    for (int i = static_cast<int>(sorted.size()) - 1; i >= 0; --i) {
      c[sorted[i]] = rest % dims_[sorted[i]].size;
      rest /= dims_[sorted[i]].size;
    }
    members.push_back(ProcessorNumber(c));
  }
  return members;
}

std::string Mesh::ToString() const {
  return absl::StrJoin(dims_, ",", [](std::string* out, const Dim& d) {
    absl::StrAppend(out, d.name, ":", d.size);
  });
}

bool TensorLayout::IsFullyReplicated() const {
  return std::all_of(mesh_axis.begin(), mesh_axis.end(), [](int a) { return a == kReplicated; });
}

v1::TensorLayout TensorLayout::ToProto() const {
  v1::TensorLayout p;
  for (int a : mesh_axis) p.add_mesh_axis(a);
  return p;
}

TensorLayout TensorLayout::FromProto(const v1::TensorLayout& proto) {
  return TensorLayout{std::vector<int>(proto.mesh_axis().begin(), proto.mesh_axis().end())};
}

std::string TensorLayout::ToString(const Shape& shape, const Mesh& mesh) const {
  std::vector<std::string> parts;
  for (int i = 0; i < shape.rank(); ++i) {
    int a = mesh_axis[i];
    parts.push_back(absl::StrCat(shape.dim(i).name, ":",
                                 a == kReplicated ? "-" : mesh.dims()[a].name));
  }
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

absl::StatusOr<LayoutRules> LayoutRules::Make(
    const std::vector<std::pair<std::string, std::string>>& rules, const Mesh& mesh) {
  LayoutRules r;
  for (const auto& [tensor_dim, mesh_dim] : rules) {
    if (tensor_dim.empty() || mesh_dim.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("layout rule '", tensor_dim, ":", mesh_dim,
                                                     "' needs both a tensor dim and a mesh dim"));
    }
    int axis = mesh.AxisOf(mesh_dim);
    if (axis < 0) {
      std::vector<std::string> known;
      for (const Dim& d : mesh.dims()) known.push_back(d.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "layout rule '", tensor_dim, ":", mesh_dim, "' names unknown mesh dim '", mesh_dim,
          "'; the mesh ", mesh.ToString().empty() ? "has no dims" : mesh.ToString(),
          known.empty() ? "" : absl::StrCat(" has ", absl::StrJoin(known, ", "))));
    }
    auto it = r.rules_.find(tensor_dim);
    if (it != r.rules_.end() && it->second != mesh_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout rules map tensor dim '", tensor_dim, "' to two mesh dims, '",
                       it->second, "' and '", mesh_dim, "'; keep one"));
    }
    r.rules_[tensor_dim] = mesh_dim;
    r.axis_[tensor_dim] = axis;
  }
  return r;
}

absl::StatusOr<LayoutRules> LayoutRules::Parse(absl::string_view text, const Mesh& mesh) {
  std::vector<std::pair<std::string, std::string>> rules;
  for (absl::string_view part :
       absl::StrSplit(text, absl::ByAnyChar(",; \t\n"), absl::SkipWhitespace())) {
    std::vector<std::string> kv = absl::StrSplit(part, ':');
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot parse layout rule '", part, "': expected tensor_dim:mesh_dim, e.g. batch:rows"));
    }
    rules.emplace_back(kv[0], kv[1]);
  }
  return Make(rules, mesh);
}

absl::StatusOr<LayoutRules> LayoutRules::FromProto(const v1::LayoutRules& proto,
                                                   const Mesh& mesh) {
  std::vector<std::pair<std::string, std::string>> rules;
  for (const v1::LayoutRule& r : proto.rules()) rules.emplace_back(r.tensor_dim(), r.mesh_dim());
  return Make(rules, mesh);
}

v1::LayoutRules LayoutRules::ToProto() const {
  v1::LayoutRules p;
  for (const auto& [t, m] : rules_) {
    v1::LayoutRule* r = p.add_rules();
    r->set_tensor_dim(t);
    r->set_mesh_dim(m);
  }
  return p;
}

int LayoutRules::MeshAxisFor(absl::string_view dim_name) const {
  auto it = axis_.find(std::string(dim_name));
  return it == axis_.end() ? kReplicated : it->second;
}

TensorLayout LayoutRules::LayoutFor(const Shape& shape) const {
  TensorLayout layout;
  for (const Dim& d : shape.dims()) layout.mesh_axis.push_back(MeshAxisFor(d.name));
  return layout;
}

std::string LayoutRules::ToString() const {
  return absl::StrJoin(rules_, ",", [](std::string* out, const auto& kv) {
    absl::StrAppend(out, kv.first, ":", kv.second);
  });
}

absl::Status CheckLayout(const Shape& shape, const TensorLayout& layout, const Mesh& mesh,
                         absl::string_view tensor, absl::string_view op,
                         absl::string_view op_type) {
  const std::string maker =
      absl::StrCat("(made by op '", op, "'", op_type.empty() ? "" : absl::StrCat(", ", op_type), ")");
  MESHRT_CHECK(static_cast<int>(layout.mesh_axis.size()) == shape.rank(), tensor);
  std::map<int, int> first_dim_on_axis;
  for (int i = 0; i < shape.rank(); ++i) {
    const int axis = layout.mesh_axis[i];
    if (axis == kReplicated) continue;
    const Dim& d = shape.dim(i);
    const Dim& m = mesh.dims()[axis];
    auto [it, inserted] = first_dim_on_axis.emplace(axis, i);
    if (!inserted) {
      const Dim& other = shape.dim(it->second);
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", tensor, "' ", maker, " of shape ", shape.ToString(),
          " has two dims, '", other.name, "' and '", d.name, "', on mesh dim '", m.name,
          "'; map one of them to another mesh dim or to nothing"));
    }
    if (d.size % m.size != 0) {
      const int64_t padded = (d.size / m.size + 1) * m.size;
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", tensor, "' ", maker, " of shape ", shape.ToString(),
          ": dim '", d.name, "' of size ", d.size, " is not divisible by mesh dim '", m.name,
          "' of size ", m.size, "; map ", d.name, " to nothing, or pad ", d.name, " to ",
          padded));
    }
  }
  return absl::OkStatus();
}

Shape SliceShape(const Shape& shape, const TensorLayout& layout, const Mesh& mesh) {
  std::vector<Dim> dims = shape.dims();
  for (int i = 0; i < shape.rank(); ++i) {
    if (layout.mesh_axis[i] != kReplicated) dims[i].size /= mesh.size(layout.mesh_axis[i]);
  }
  return Shape(std::move(dims));
}

std::vector<int64_t> SliceBegin(const Shape& shape, const TensorLayout& layout, const Mesh& mesh,
                                const std::vector<int64_t>& coord) {
  std::vector<int64_t> begin(shape.rank(), 0);
  for (int i = 0; i < shape.rank(); ++i) {
    const int a = layout.mesh_axis[i];
    if (a != kReplicated) begin[i] = shape.dim(i).size / mesh.size(a) * coord[a];
  }
  return begin;
}

}  // namespace meshrt
