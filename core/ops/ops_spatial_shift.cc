// The data-movement ops of the spatial family: shift, halo_exchange, and the internal _dim_range
// and _dim_concat the spatial lowerings emit. Shape inference, reference kernels, registration;
// conventions in core/ops/ops_spatial.h. The kernels work on positions along one named dim and copy
// every other dim through, so they run on slices exactly as on whole tensors.
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "core/ops/ops_spatial.h"
#include "util/status_macros.h"

namespace meshrt {
namespace spatial {

v1::Op DimRangeOp(const std::string& source_op, const std::string& dim, int64_t begin,
                  int64_t size) {
  v1::Op op;
  op.set_name(source_op);
  op.set_type("_dim_range");
  op.add_dims(dim);
  (*op.mutable_attrs())["begin"].set_i(begin);
  (*op.mutable_attrs())["size"].set_i(size);
  return op;
}

v1::Op DimConcatOp(const std::string& source_op, const std::string& dim) {
  v1::Op op;
  op.set_name(source_op);
  op.set_type("_dim_concat");
  op.add_dims(dim);
  return op;
}

v1::Op ShiftOp(const std::string& source_op, const std::string& dim, int64_t offset, bool wrap) {
  v1::Op op;
  op.set_name(source_op);
  op.set_type("shift");
  op.add_dims(dim);
  (*op.mutable_attrs())["offset"].set_i(offset);
  (*op.mutable_attrs())["wrap"].set_b(wrap);
  return op;
}

namespace {

// Element i of `t` as 4 raw bytes (both dtypes are 4 bytes wide): the movement kernels only copy.
const char* Bytes(const Tensor& t) {
  return t.dtype() == DType::kFloat32 ? reinterpret_cast<const char*>(t.f32())
                                      : reinterpret_cast<const char*>(t.i32());
}
char* MutableBytes(Tensor* t) {
  return t->dtype() == DType::kFloat32 ? reinterpret_cast<char*>(t->f32())
                                       : reinterpret_cast<char*>(t->i32());
}
constexpr int64_t kElem = 4;

// Sizes of the dims before `axis` and after it (row-major blocks around one axis).
int64_t Outer(const Shape& s, int axis) {
  int64_t n = 1;
  for (int d = 0; d < axis; ++d) n *= s.dim(d).size;
  return n;
}
int64_t Inner(const Shape& s, int axis) {
  int64_t n = 1;
  for (int d = axis + 1; d < s.rank(); ++d) n *= s.dim(d).size;
  return n;
}

int64_t PositiveMod(int64_t x, int64_t n) { return ((x % n) + n) % n; }

absl::StatusOr<int> DimIndex(const v1::Op& op, const Shape& s, int which) {
  if (op.dims_size() <= which) return OpError(op, "missing a dim name in `dims`");
  const int i = s.IndexOf(op.dims(which));
  if (i < 0) {
    return OpError(op, absl::StrCat("dim '", op.dims(which), "' is not a dim of ", s.ToString()));
  }
  return i;
}

// Checks that `a` and `b` have the same dims except at position `axis` (whose size may differ,
// and whose name may too when `rename_ok`).
absl::Status SameExceptAxis(const v1::Op& op, const Shape& a, const Shape& b, int axis,
                            bool rename_ok) {
  bool ok = a.rank() == b.rank();
  for (int d = 0; ok && d < a.rank(); ++d) {
    if (d == axis) {
      ok = rename_ok || a.dim(d).name == b.dim(d).name;
    } else {
      ok = a.dim(d) == b.dim(d);
    }
  }
  if (!ok) {
    return OpError(op, absl::StrCat("shapes ", a.ToString(), " and ", b.ToString(),
                                    " must agree except along dim ", axis));
  }
  return absl::OkStatus();
}

// ---- shift ------------------------------------------------------------------------------------

absl::StatusOr<TensorType> InferShift(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(DimIndex(op, in[0].shape, 0).status());
  if (op.dims_size() != 1) return OpError(op, "takes exactly one dim in `dims`");
  RETURN_IF_ERROR(IntAttr(op, "offset").status());
  return in[0];
}

absl::Status ShiftKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.size() != 1) return OpError(op, "takes one input");
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(const int axis, DimIndex(op, x.shape(), 0));
  ASSIGN_OR_RETURN(const int64_t offset, IntAttr(op, "offset"));
  const bool wrap = BoolAttrOr(op, "wrap", false);
  if (x.shape() != out->shape() || x.dtype() != out->dtype()) {
    return OpError(op, absl::StrCat("output ", out->shape().ToString(), " must match input ",
                                    x.shape().ToString()));
  }
  const int64_t outer = Outer(x.shape(), axis), n = x.shape().dim(axis).size;
  const int64_t inner = Inner(x.shape(), axis) * kElem;
  const char* src = Bytes(x);
  char* dst = MutableBytes(out);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t from = i - offset;
      if (wrap) from = PositiveMod(from, n);
      char* to = dst + (o * n + i) * inner;
      if (from < 0 || from >= n) {
        std::memset(to, 0, inner);
      } else {
        std::memcpy(to, src + (o * n + from) * inner, inner);
      }
    }
  }
  return absl::OkStatus();
}

// ---- halo_exchange ----------------------------------------------------------------------------

std::string HaloOutputDim(const v1::Op& op) {
  return StringAttrOr(op, "output_dim", op.dims_size() > 1 ? op.dims(1) + "_halo" : "");
}

absl::StatusOr<TensorType> InferHalo(const v1::Op& op, const std::vector<TensorType>& in) {
  const Shape& s = in[0].shape;
  if (op.dims_size() != 2) return OpError(op, "takes dims [blocks_dim, block_dim]");
  ASSIGN_OR_RETURN(const int ib, DimIndex(op, s, 0));
  ASSIGN_OR_RETURN(const int ik, DimIndex(op, s, 1));
  if (ib == ik) return OpError(op, "blocks_dim and block_dim must differ");
  ASSIGN_OR_RETURN(const int64_t halo, IntAttr(op, "halo"));
  const int64_t b = s.dim(ik).size;
  if (halo < 0 || halo > b) {
    return OpError(op, absl::StrCat("halo ", halo, " must be in [0, ", b, "] (the size of '",
                                    op.dims(1), "')"));
  }
  const std::string name = HaloOutputDim(op);
  const int clash = s.IndexOf(name);
  if (name.empty() || (clash >= 0 && clash != ik) || (clash == ik && halo != 0)) {
    return OpError(op, absl::StrCat("output_dim '", name, "' must be a new dim name"));
  }
  std::vector<Dim> dims = s.dims();
  dims[ik] = Dim{name, b + 2 * halo};
  return TensorType{Shape(std::move(dims)), in[0].dtype};
}

absl::Status HaloKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.size() != 1) return OpError(op, "takes one input");
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(const int ib, DimIndex(op, x.shape(), 0));
  ASSIGN_OR_RETURN(const int ik, DimIndex(op, x.shape(), 1));
  ASSIGN_OR_RETURN(const int64_t halo, IntAttr(op, "halo"));
  const bool wrap = BoolAttrOr(op, "wrap", false);
  const int64_t nb = x.shape().dim(ib).size, b = x.shape().dim(ik).size;
  RETURN_IF_ERROR(SameExceptAxis(op, x.shape(), out->shape(), ik, /*rename_ok=*/true));
  if (out->shape().dim(ik).size != b + 2 * halo) {
    return OpError(op, absl::StrCat("output ", out->shape().ToString(), " needs ", b + 2 * halo,
                                    " positions per block"));
  }
  const std::vector<int64_t> xs = x.shape().Strides();
  const std::vector<int64_t> sizes = out->shape().Sizes();
  std::vector<int64_t> idx(sizes.size(), 0);
  const char* src = Bytes(x);
  char* dst = MutableBytes(out);
  for (int64_t e = 0; e < out->num_elements(); ++e) {
    // Position along the unblocked spatial dim.
    int64_t pos = idx[ib] * b + idx[ik] - halo;
    if (wrap) pos = PositiveMod(pos, nb * b);
    if (pos < 0 || pos >= nb * b) {
      std::memset(dst + e * kElem, 0, kElem);
    } else {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) {
        const int64_t v = static_cast<int>(d) == ib   ? pos / b
                          : static_cast<int>(d) == ik ? pos % b
                                                      : idx[d];
        off += v * xs[d];
      }
      std::memcpy(dst + e * kElem, src + off * kElem, kElem);
    }
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0 && ++idx[d] == sizes[d]; --d) idx[d] = 0;
  }
  return absl::OkStatus();
}

// ---- internal: _dim_range, _dim_concat --------------------------------------------------------

absl::StatusOr<TensorType> InferInternal(const v1::Op& op, const std::vector<TensorType>&) {
  return OpError(op, "is internal to the spatial lowerings; use slice or concat in graphs");
}

absl::Status DimRangeKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.size() != 1) return OpError(op, "takes one input");
  const Tensor& x = *in[0];
  ASSIGN_OR_RETURN(const int axis, DimIndex(op, x.shape(), 0));
  ASSIGN_OR_RETURN(const int64_t begin, IntAttr(op, "begin"));
  ASSIGN_OR_RETURN(const int64_t size, IntAttr(op, "size"));
  RETURN_IF_ERROR(SameExceptAxis(op, x.shape(), out->shape(), axis, /*rename_ok=*/false));
  const int64_t n = x.shape().dim(axis).size;
  if (begin < 0 || size != out->shape().dim(axis).size || begin + size > n) {
    return OpError(op, absl::StrCat("range [", begin, ", ", begin + size, ") of ", n,
                                    " positions into ", out->shape().ToString()));
  }
  const int64_t outer = Outer(x.shape(), axis), inner = Inner(x.shape(), axis) * kElem;
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(MutableBytes(out) + o * size * inner, Bytes(x) + (o * n + begin) * inner,
                size * inner);
  }
  return absl::OkStatus();
}

absl::Status DimConcatKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.empty()) return OpError(op, "takes at least one input");
  ASSIGN_OR_RETURN(const int axis, DimIndex(op, in[0]->shape(), 0));
  int64_t total = 0;
  for (const Tensor* t : in) {
    RETURN_IF_ERROR(SameExceptAxis(op, in[0]->shape(), t->shape(), axis, /*rename_ok=*/false));
    if (t->dtype() != out->dtype()) return OpError(op, "inputs and output differ in dtype");
    total += t->shape().dim(axis).size;
  }
  RETURN_IF_ERROR(SameExceptAxis(op, in[0]->shape(), out->shape(), axis, /*rename_ok=*/true));
  if (out->shape().dim(axis).size != total) {
    return OpError(op, absl::StrCat("output ", out->shape().ToString(), " needs ", total,
                                    " positions along dim ", axis));
  }
  const int64_t outer = Outer(out->shape(), axis), inner = Inner(out->shape(), axis) * kElem;
  char* dst = MutableBytes(out);
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor* t : in) {
      const int64_t chunk = t->shape().dim(axis).size * inner;
      std::memcpy(dst, Bytes(*t) + o * chunk, chunk);
      dst += chunk;
    }
  }
  return absl::OkStatus();
}

const bool kRegistered = RegisterOps({
    {"shift", OpFamily::kSpatial, 1, 1, true,
     "y[i] = x[i - attrs.offset] along dims[0]; zero fill, or wrap with attrs.wrap",
     "permute along a split dim (two for a partial block)", false, InferShift, ShiftKernel,
     LowerShift},
    {"halo_exchange", OpFamily::kSpatial, 1, 1, true,
     "blocks [dims[0]] of size dims[1] get attrs.halo positions from each neighbour block",
     "permute of the halo edges along a split blocks dim", false, InferHalo, HaloKernel,
     LowerHaloExchange},
    {"_dim_range", OpFamily::kSpatial, 1, 1, false,
     "internal (spatial lowerings): positions [begin, begin+size) of dims[0]", "none", false,
     InferInternal, DimRangeKernel, nullptr},
    {"_dim_concat", OpFamily::kSpatial, 1, -1, false,
     "internal (spatial lowerings): inputs concatenated along dims[0]", "none", false,
     InferInternal, DimConcatKernel, nullptr},
});

}  // namespace
}  // namespace spatial
}  // namespace meshrt
