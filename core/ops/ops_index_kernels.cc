// Reference kernels of the indexing family. Lines along the op's dim are walked with
// StridedIterator over the other dims, matched by name, so slices work as whole tensors do. Only
// one_hot and range read where their slice sits (`_slice_begin`, absent = 0).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/ops/ops_data.h"
#include "core/ops/ops_index.h"
#include "core/ops/reference_kernels.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

absl::Status Arity(absl::Span<const Tensor* const> in, size_t lo, size_t hi) {
  if (in.size() < lo || in.size() > hi) {
    return absl::InvalidArgumentError(absl::StrCat("got ", in.size(), " inputs"));
  }
  for (const Tensor* t : in) {
    if (t == nullptr) return absl::InvalidArgumentError("an input is null");
  }
  return absl::OkStatus();
}

absl::Status Want(const Tensor& t, DType dtype, absl::string_view role) {
  if (t.dtype() != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, " is ", DTypeName(t.dtype()), ", not ", DTypeName(dtype)));
  }
  return absl::OkStatus();
}

// Both ways: `a` and `b` have the same dims by name and size (any order).
absl::Status SameDims(const Shape& a, absl::string_view a_what, const Shape& b,
                      absl::string_view b_what) {
  RETURN_IF_ERROR(CheckDimsIn(a, a_what, b, b_what));
  return CheckDimsIn(b, b_what, a, a_what);
}

// Index of dim `name` in `s`, or InvalidArgument.
absl::StatusOr<int> Find(const Shape& s, const std::string& name, absl::string_view what) {
  const int i = s.IndexOf(name);
  if (i < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", s.ToString(), " lacks dim '", name, "'"));
  }
  return i;
}

absl::StatusOr<std::string> OpDim(const v1::Op& op) {
  if (op.dims_size() < 1) return absl::InvalidArgumentError("needs `dims`");
  return op.dims(0);
}

// `_slice_begin` at output dim `i`, or 0 when the attribute is absent (whole tensors).
int64_t SliceBegin(const v1::Op& op, int i) {
  auto it = op.attrs().find("_slice_begin");
  if (it == op.attrs().end() || it->second.value_case() != v1::AttrValue::kInts ||
      i >= it->second.ints().values_size()) {
    return 0;
  }
  return it->second.ints().values(i);
}

template <typename T>
const T* Data(const Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.f32();
  } else {
    return t.i32();
  }
}
template <typename T>
T* Data(Tensor* t) {
  if constexpr (std::is_same_v<T, float>) {
    return t->f32();
  } else {
    return t->i32();
  }
}

// The order of top_k, argmax and descending sort: larger first, NaN above every number, ties to
// the smaller id. A strict weak order even with NaNs.
template <typename T>
bool Greater(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

// Walks the lines along dim `dim` of `x` (and of `ids`, when given: dims among x's, broadcast by
// name): for each, calls f(offset of the line's first element in x, line stride in x, the ids of
// the line's elements). Without ids, ids are positions.
template <typename F>
void ForEachLine(const Tensor& x, int dim, const Tensor* ids, F f) {
  const Shape rest = WithoutDim(x.shape(), x.shape().dim(dim).name);
  const int64_t n = x.shape().dim(dim).size, xs = x.shape().Strides()[dim];
  const Shape ids_shape = ids ? ids->shape() : Shape();
  const int j = ids ? ids_shape.IndexOf(x.shape().dim(dim).name) : -1;
  const int64_t is = j < 0 ? 0 : ids_shape.Strides()[j];
  std::vector<int64_t> line_ids(n);
  for (StridedIterator it(rest.Sizes(),
                          {StridesByName(x.shape(), rest), StridesByName(ids_shape, rest)});
       !it.done(); it.Next()) {
    for (int64_t t = 0; t < n; ++t) line_ids[t] = ids ? ids->i32()[it.offset(1) + t * is] : t;
    f(it.offset(0), xs, line_ids, it);
  }
}

// top_k (k = out's new dim size; out is values or indices) and argmax (k = 1, no new dim).
template <typename T>
absl::Status TopK(const v1::Op& op, const Tensor& x, const Tensor* ids, Tensor* out) {
  ASSIGN_OR_RETURN(const std::string dim, OpDim(op));
  ASSIGN_OR_RETURN(const int di, Find(x.shape(), dim, "the input"));
  const bool argmax = op.type() == "argmax";
  const std::string new_dim = argmax ? "" : StringAttrOr(op, "new_dim", dim);
  const bool values = !argmax && StringAttrOr(op, "output", "values") == "values";
  RETURN_IF_ERROR(Want(*out, values ? x.dtype() : DType::kInt32, "the output"));
  const int oi = argmax ? -1 : out->shape().IndexOf(new_dim);
  if (!argmax && oi < 0) return Find(out->shape(), new_dim, "the output").status();
  const int64_t k = argmax ? 1 : out->shape().dim(oi).size;
  const int64_t n = x.shape().dim(di).size;
  if (k > n) return absl::InvalidArgumentError(absl::StrCat("k = ", k, " > ", n));
  const Shape rest = WithoutDim(x.shape(), dim);
  RETURN_IF_ERROR(SameDims(rest, "the input", WithoutDim(out->shape(), new_dim), "the output"));
  if (ids != nullptr) {
    RETURN_IF_ERROR(Want(*ids, DType::kInt32, "ids"));
    RETURN_IF_ERROR(CheckDimsIn(ids->shape(), "ids", x.shape(), "the input"));
  }
  const T* px = Data<T>(x);
  const std::vector<int64_t> out_rest = StridesByName(out->shape(), rest);
  const int64_t os = argmax ? 0 : out->shape().Strides()[oi];
  std::vector<int64_t> order(n);
  ForEachLine(
      x, di, ids,
      [&](int64_t base, int64_t xs, const std::vector<int64_t>& id, const StridedIterator& it) {
        std::iota(order.begin(), order.end(), 0);
        auto above = [&](int64_t a, int64_t b) {
          const T va = px[base + a * xs], vb = px[base + b * xs];
          if (Greater(va, vb)) return true;
          if (Greater(vb, va)) return false;
          return id[a] < id[b];
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), above);
        int64_t o = 0;
        for (size_t r = 0; r < rest.Sizes().size(); ++r) o += it.index()[r] * out_rest[r];
        for (int64_t t = 0; t < k; ++t) {
          if (values) {
            Data<T>(out)[o + t * os] = px[base + order[t] * xs];
          } else {
            out->i32()[o + t * os] = static_cast<int32_t>(id[order[t]]);
          }
        }
      });
  return absl::OkStatus();
}

template <typename T>
absl::Status Sort(const v1::Op& op, const Tensor& x, Tensor* out) {
  ASSIGN_OR_RETURN(const std::string dim, OpDim(op));
  ASSIGN_OR_RETURN(const int di, Find(x.shape(), dim, "the input"));
  const bool values = StringAttrOr(op, "output", "values") == "values";
  const bool descending = BoolAttrOr(op, "descending", false);
  RETURN_IF_ERROR(Want(*out, values ? x.dtype() : DType::kInt32, "the output"));
  RETURN_IF_ERROR(SameDims(x.shape(), "the input", out->shape(), "the output"));
  const T* px = Data<T>(x);
  const Shape rest = WithoutDim(x.shape(), dim);
  const std::vector<int64_t> out_rest = StridesByName(out->shape(), rest);
  const int64_t os = out->shape().Strides()[out->shape().IndexOf(dim)];
  const int64_t n = x.shape().dim(di).size;
  std::vector<int64_t> order(n);
  ForEachLine(
      x, di, nullptr,
      [&](int64_t base, int64_t xs, const std::vector<int64_t>&, const StridedIterator& it) {
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          const T va = px[base + a * xs], vb = px[base + b * xs];
          return descending ? Greater(va, vb) : Greater(vb, va);
        });
        int64_t o = 0;
        for (size_t r = 0; r < out_rest.size(); ++r) o += it.index()[r] * out_rest[r];
        for (int64_t t = 0; t < n; ++t) {
          if (values) {
            Data<T>(out)[o + t * os] = px[base + order[t] * xs];
          } else {
            out->i32()[o + t * os] = static_cast<int32_t>(order[t]);
          }
        }
      });
  return absl::OkStatus();
}

// Accumulates in double (float32) or int64 (int32), as the other reference kernels do.
template <typename T, typename Acc>
absl::Status Cumsum(const v1::Op& op, const Tensor& x, const Tensor* carry, Tensor* out) {
  ASSIGN_OR_RETURN(const std::string dim, OpDim(op));
  ASSIGN_OR_RETURN(const int di, Find(x.shape(), dim, "the input"));
  RETURN_IF_ERROR(Want(*out, x.dtype(), "the output"));
  RETURN_IF_ERROR(SameDims(x.shape(), "the input", out->shape(), "the output"));
  const Shape rest = WithoutDim(x.shape(), dim);
  if (carry != nullptr) {
    RETURN_IF_ERROR(Want(*carry, x.dtype(), "carry"));
    const int ci = carry->shape().IndexOf(dim);
    if (ci >= 0 && carry->shape().dim(ci).size != 1) {
      return absl::InvalidArgumentError(absl::StrCat("carry ", carry->shape().ToString(),
                                                     " has dim '", dim, "' of size other than 1"));
    }
    RETURN_IF_ERROR(CheckDimsIn(WithoutDim(carry->shape(), dim), "carry", rest, "the input"));
  }
  const bool exclusive = BoolAttrOr(op, "exclusive", false);
  const T* px = Data<T>(x);
  const T* pc = carry ? Data<T>(*carry) : nullptr;
  const std::vector<int64_t> out_rest = StridesByName(out->shape(), rest);
  const std::vector<int64_t> carry_rest = StridesByName(carry ? carry->shape() : Shape(), rest);
  const int64_t os = out->shape().Strides()[out->shape().IndexOf(dim)];
  const int64_t n = x.shape().dim(di).size;
  ForEachLine(
      x, di, nullptr,
      [&](int64_t base, int64_t xs, const std::vector<int64_t>&, const StridedIterator& it) {
        int64_t o = 0, c = 0;
        for (size_t r = 0; r < out_rest.size(); ++r) {
          o += it.index()[r] * out_rest[r];
          c += it.index()[r] * carry_rest[r];
        }
        Acc acc = pc ? static_cast<Acc>(pc[c]) : Acc(0);
        for (int64_t t = 0; t < n; ++t) {
          const Acc v = static_cast<Acc>(px[base + t * xs]);
          if (!exclusive) acc += v;
          Data<T>(out)[o + t * os] = static_cast<T>(acc);
          if (exclusive) acc += v;
        }
      });
  return absl::OkStatus();
}

}  // namespace

absl::Status OneHotKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(Arity(in, 1, 1));
  const Tensor& idx = *in[0];
  RETURN_IF_ERROR(Want(idx, DType::kInt32, "indices"));
  int depth = -1;
  for (int i = 0; i < out->shape().rank(); ++i) {
    if (!idx.shape().Contains(out->shape().dim(i).name)) {
      if (depth >= 0) return absl::InvalidArgumentError("the output has two dims indices lack");
      depth = i;
    }
  }
  if (depth < 0) return absl::InvalidArgumentError("the output has no depth dim");
  const Shape rest = WithoutDim(out->shape(), out->shape().dim(depth).name);
  RETURN_IF_ERROR(SameDims(idx.shape(), "indices", rest, "the output"));
  const int64_t begin = SliceBegin(op, depth), n = out->shape().dim(depth).size;
  const int64_t ds = out->shape().Strides()[depth];
  const float on = FloatAttrOr(op, "on_value", 1.0f), off = FloatAttrOr(op, "off_value", 0.0f);
  // Each position's run along depth: every element `off`, then the index's one `on` (the same
  // values as comparing every element with the index, without a branch per element).
  auto fill = [&](auto* o, auto on_value, auto off_value) {
    const int32_t* ids = idx.i32();
    for (StridedIterator it(rest.Sizes(),
                            {StridesByName(idx.shape(), rest), StridesByName(out->shape(), rest)});
         !it.done(); it.Next()) {
      auto* run = o + it.offset(1);
      if (ds == 1) {
        std::fill(run, run + n, off_value);
      } else {
        for (int64_t j = 0; j < n; ++j) run[j * ds] = off_value;
      }
      const int64_t j = static_cast<int64_t>(ids[it.offset(0)]) - begin;
      if (j >= 0 && j < n) run[j * ds] = on_value;
    }
  };
  if (out->dtype() == DType::kFloat32) {
    fill(out->f32(), on, off);
  } else {
    fill(out->i32(), static_cast<int32_t>(on), static_cast<int32_t>(off));
  }
  return absl::OkStatus();
}

absl::Status GatherKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(Arity(in, 2, 3));
  const Tensor& w = *in[0];
  const Tensor& idx = *in[1];
  RETURN_IF_ERROR(Want(idx, DType::kInt32, "indices"));
  RETURN_IF_ERROR(Want(*out, w.dtype(), "the output"));
  ASSIGN_OR_RETURN(const std::string dim, OpDim(op));
  ASSIGN_OR_RETURN(const int di, Find(w.shape(), dim, "the weights"));
  const int64_t rows = w.shape().dim(di).size;
  int64_t first = 0;
  if (in.size() == 3) {
    const Tensor& ids = *in[2];
    RETURN_IF_ERROR(Want(ids, DType::kInt32, "row_ids"));
    if (ids.shape() != Shape({w.shape().dim(di)})) {
      return absl::InvalidArgumentError(
          absl::StrCat("row_ids ", ids.shape().ToString(), " must be [", dim, ":", rows, "]"));
    }
    first = rows > 0 ? ids.i32()[0] : 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (ids.i32()[r] != first + r) return absl::InvalidArgumentError("row_ids not consecutive");
    }
  }
  const Shape w_rest = WithoutDim(w.shape(), dim);
  RETURN_IF_ERROR(CheckDimsIn(w_rest, "the weights", out->shape(), "the output"));
  RETURN_IF_ERROR(CheckDimsIn(idx.shape(), "indices", out->shape(), "the output"));
  for (const Dim& d : out->shape().dims()) {
    if (!w_rest.Contains(d.name) && !idx.shape().Contains(d.name)) {
      return absl::InvalidArgumentError(absl::StrCat("output dim '", d.name, "' is in no input"));
    }
  }
  const int64_t ws = w.shape().Strides()[di];
  const bool f32 = w.dtype() == DType::kFloat32;
  int64_t o = 0;
  for (StridedIterator it(out->shape().Sizes(), {StridesByName(w.shape(), out->shape()),
                                                 StridesByName(idx.shape(), out->shape())});
       !it.done(); it.Next(), ++o) {
    const int64_t row = static_cast<int64_t>(idx.i32()[it.offset(1)]) - first;
    const bool held = row >= 0 && row < rows;
    if (f32) {
      out->f32()[o] = held ? w.f32()[it.offset(0) + row * ws] : 0.0f;
    } else {
      out->i32()[o] = held ? w.i32()[it.offset(0) + row * ws] : 0;
    }
  }
  return absl::OkStatus();
}

absl::Status RangeKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(Arity(in, 0, 0));
  if (out->shape().rank() != 1) return absl::InvalidArgumentError("the output must have one dim");
  const int64_t begin = SliceBegin(op, 0);
  for (int64_t i = 0; i < out->num_elements(); ++i) {
    if (out->dtype() == DType::kFloat32) {
      out->f32()[i] = static_cast<float>(begin + i);
    } else {
      out->i32()[i] = static_cast<int32_t>(begin + i);
    }
  }
  return absl::OkStatus();
}

absl::Status TopKKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(Arity(in, 1, 2));
  const Tensor* ids = in.size() == 2 ? in[1] : nullptr;
  return in[0]->dtype() == DType::kFloat32 ? TopK<float>(op, *in[0], ids, out)
                                           : TopK<int32_t>(op, *in[0], ids, out);
}

absl::Status ArgmaxKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  return TopKKernel(op, in, out);
}

absl::Status CumsumKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(Arity(in, 1, 2));
  const Tensor* carry = in.size() == 2 ? in[1] : nullptr;
  return in[0]->dtype() == DType::kFloat32 ? Cumsum<float, double>(op, *in[0], carry, out)
                                           : Cumsum<int32_t, int64_t>(op, *in[0], carry, out);
}

absl::Status SortKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(Arity(in, 1, 1));
  return in[0]->dtype() == DType::kFloat32 ? Sort<float>(op, *in[0], out)
                                           : Sort<int32_t>(op, *in[0], out);
}

}  // namespace meshrt
