#include "core/ir/shape.h"

#include <cctype>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

Shape::Shape(std::initializer_list<Dim> dims) : Shape(std::vector<Dim>(dims)) {}

Shape::Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {
  std::set<std::string> names;
  for (const Dim& d : dims_) MESHRT_CHECK(names.insert(d.name).second, "repeated dim ", d.name);
}

absl::StatusOr<Shape> Shape::Make(std::vector<Dim> dims, absl::string_view what) {
  std::set<std::string> names;
  for (const Dim& d : dims) {
    if (d.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has a dim with an empty name"));
    }
    if (d.size < 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": dim '", d.name, "' has size ",
                                                     d.size, "; sizes must be >= 1"));
    }
    if (!names.insert(d.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " repeats dim '", d.name, "'; every dim of a shape needs its own name (rename one)"));
    }
  }
  RETURN_IF_ERROR(CheckedDimProduct(dims, kMaxElements, what).status());
  Shape s;
  s.dims_ = std::move(dims);
  return s;
}

absl::StatusOr<int64_t> CheckedDimProduct(const std::vector<Dim>& dims, int64_t max,
                                          absl::string_view what) {
  int64_t n = 1;
  for (const Dim& d : dims) {
    if (d.size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dim '", d.name, "' has size ", d.size, "; sizes must be >= 1"));
    }
    // n <= max and d.size >= 1: the product exceeds max exactly when n > max / d.size.
    if (n > max / d.size) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": the product of the sizes passes ", max, " at dim '", d.name, "' (size ", d.size,
          ", after ", n, " from the dims before it); use smaller dims"));
    }
    n *= d.size;
  }
  return n;
}

absl::StatusOr<std::vector<Dim>> ParseDimList(absl::string_view text) {
  std::vector<Dim> dims;
  for (absl::string_view part :
       absl::StrSplit(text, absl::ByAnyChar(",; \t\n"), absl::SkipWhitespace())) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, ':');
    int64_t size = 0;
    if (kv.size() != 2 || kv[0].empty() || !absl::SimpleAtoi(kv[1], &size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot parse '", part, "': expected name:size, e.g. batch:8"));
    }
    dims.push_back(Dim{std::string(kv[0]), size});
  }
  return dims;
}

absl::StatusOr<Shape> Shape::Parse(absl::string_view text) {
  auto dims = ParseDimList(text);
  if (!dims.ok()) return dims.status();
  return Make(*std::move(dims), absl::StrCat("shape '", text, "'"));
}

absl::StatusOr<Shape> Shape::FromProto(const v1::Shape& proto, absl::string_view what) {
  std::vector<Dim> dims;
  for (const v1::Dim& d : proto.dims()) dims.push_back(Dim{d.name(), d.size()});
  return Make(std::move(dims), what);
}

v1::Shape Shape::ToProto() const {
  v1::Shape p;
  for (const Dim& d : dims_) {
    v1::Dim* pd = p.add_dims();
    pd->set_name(d.name);
    pd->set_size(d.size);
  }
  return p;
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (const Dim& d : dims_) n *= d.size;
  return n;
}

absl::StatusOr<int64_t> Shape::CheckedNumElements(absl::string_view what) const {
  return CheckedDimProduct(dims_, kMaxElements, what);
}

int Shape::IndexOf(absl::string_view name) const {
  for (int i = 0; i < rank(); ++i) {
    if (dims_[i].name == name) return i;
  }
  return -1;
}

std::vector<int64_t> Shape::Strides() const {
  std::vector<int64_t> strides(dims_.size());
  int64_t s = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims_[i].size;
  }
  return strides;
}

std::vector<int64_t> Shape::Sizes() const {
  std::vector<int64_t> sizes;
  for (const Dim& d : dims_) sizes.push_back(d.size);
  return sizes;
}

std::string Shape::ToString() const {
  return absl::StrCat("[",
                      absl::StrJoin(dims_, ", ",
                                    [](std::string* out, const Dim& d) {
                                      absl::StrAppend(out, d.name, ":", d.size);
                                    }),
                      "]");
}

}  // namespace meshrt
