#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/ops/ops_math.h"
#include "core/ops/reference_kernels.h"

namespace meshrt {
namespace math {

bool HasScalar(const v1::Op& op) {
  auto it = op.attrs().find("scalar");
  return it != op.attrs().end() && (it->second.value_case() == v1::AttrValue::kF ||
                                    it->second.value_case() == v1::AttrValue::kI);
}

absl::StatusOr<double> ScalarAttr(const v1::Op& op) {
  auto it = op.attrs().find("scalar");
  if (it != op.attrs().end() && it->second.value_case() == v1::AttrValue::kF) {
    return static_cast<double>(it->second.f());
  }
  if (it != op.attrs().end() && it->second.value_case() == v1::AttrValue::kI) {
    return static_cast<double>(it->second.i());
  }
  return OpError(op, "needs a number attribute 'scalar' (attrs {key: \"scalar\" value {f: ...}})");
}

absl::StatusOr<DType> CastTarget(const v1::Op& op) {
  const std::string name = StringAttrOr(op, "dtype", "");
  DType from_attr = DType::kFloat32;
  if (!name.empty()) {
    if (name == "float32") {
      from_attr = DType::kFloat32;
    } else if (name == "int32") {
      from_attr = DType::kInt32;
    } else {
      return OpError(op, absl::StrCat("attrs.dtype is '", name, "'; use \"float32\" or \"int32\""));
    }
  }
  if (op.dtype() == v1::DT_INVALID) {
    if (name.empty()) return OpError(op, "needs attrs {dtype: \"float32\" or \"int32\"}");
    return from_attr;
  }
  auto from_field = DTypeFromProto(op.dtype());
  if (!from_field.ok()) return OpError(op, from_field.status().message());
  if (!name.empty() && *from_field != from_attr) {
    return OpError(op, absl::StrCat("attrs.dtype '", name, "' disagrees with the dtype field (",
                                    DTypeName(*from_field), ")"));
  }
  return *from_field;
}

absl::StatusOr<Shape> BroadcastShape(const v1::Op& op, const std::vector<Shape>& shapes) {
  std::vector<Dim> dims;
  std::vector<int> first_input;  // which input each dim came from, for the error message
  for (size_t k = 0; k < shapes.size(); ++k) {
    for (const Dim& d : shapes[k].dims()) {
      auto it =
          std::find_if(dims.begin(), dims.end(), [&](const Dim& e) { return e.name == d.name; });
      if (it == dims.end()) {
        dims.push_back(d);
        first_input.push_back(static_cast<int>(k));
      } else if (it->size != d.size) {
        const int j = first_input[it - dims.begin()];
        return OpError(op, absl::StrCat("dim '", d.name, "' is ", it->size, " in '", op.inputs(j),
                                        "' but ", d.size, " in '", op.inputs(k), "'"));
      }
    }
  }
  return Shape(std::move(dims));
}

absl::StatusOr<std::set<std::string>> ReducedDims(const v1::Op& op, const Shape& x, bool need_one) {
  std::set<std::string> dims;
  for (const std::string& d : op.dims()) {
    if (!x.Contains(d)) {
      return OpError(op, absl::StrCat("reduces dim '", d, "' but input '", op.inputs(0),
                                      "' has shape ", x.ToString()));
    }
    if (!dims.insert(d).second) return OpError(op, absl::StrCat("lists dim '", d, "' twice"));
  }
  if (dims.empty()) {
    if (need_one) {
      return OpError(
          op, absl::StrCat("needs `dims`: the dims of ", x.ToString(), " to normalise over"));
    }
    for (const Dim& d : x.dims()) dims.insert(d.name);
  }
  return dims;
}

Shape Without(const Shape& s, const std::set<std::string>& drop) {
  std::vector<Dim> dims;
  for (const Dim& d : s.dims()) {
    if (!drop.count(d.name)) dims.push_back(d);
  }
  return Shape(std::move(dims));
}

template <>
const float* DataOf<float>(const Tensor& t) {
  return t.f32();
}
template <>
const int32_t* DataOf<int32_t>(const Tensor& t) {
  return t.i32();
}
template <>
float* MutableDataOf<float>(Tensor* t) {
  return t->f32();
}
template <>
int32_t* MutableDataOf<int32_t>(Tensor* t) {
  return t->i32();
}

std::vector<int64_t> Offsets(const Shape& t, const Shape& space) {
  std::vector<int64_t> out;
  out.reserve(space.num_elements());
  for (StridedIterator it(space.Sizes(), {StridesByName(t, space)}); !it.done(); it.Next()) {
    out.push_back(it.offset(0));
  }
  return out;
}

absl::Status CheckInputs(absl::Span<const Tensor* const> inputs, size_t min, size_t max) {
  if (inputs.size() < min || inputs.size() > max) {
    return absl::InvalidArgumentError(
        min == max ? absl::StrCat("takes ", min, " input(s) but got ", inputs.size())
                   : absl::StrCat("takes ", min, " to ", max, " inputs but got ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " is null"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFloat(const Tensor& t, absl::string_view what) {
  if (t.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", DTypeName(t.dtype()), " but this op needs float32"));
  }
  return absl::OkStatus();
}

absl::Status SplitReduce(const Shape& in, const Shape& out, Shape* kept, Shape* reduced) {
  absl::Status s = CheckDimsIn(out, "the output", in, "the input");
  if (!s.ok()) return s;
  std::vector<Dim> r;
  for (const Dim& d : in.dims()) {
    if (!out.Contains(d.name)) r.push_back(d);
  }
  *kept = out;
  *reduced = Shape(std::move(r));
  return absl::OkStatus();
}

}  // namespace math
}  // namespace meshrt
