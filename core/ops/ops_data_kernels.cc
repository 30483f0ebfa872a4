// Reference kernels of the data-movement family. Every op is a copy of runs of elements along one
// dim (CopyAlong); dims are matched by name, so slices work as whole tensors do. The kernels read
// their sizes from the tensors handed to them, and their attributes as the graph gives them, so
// the lowering (lower_data.cc) runs them on inputs that are whole along the op's dim, or states
// local attributes.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/ops/ops_data.h"
#include "core/ops/reference_kernels.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

const char* Raw(const Tensor& t) {
  return t.dtype() == DType::kFloat32 ? reinterpret_cast<const char*>(t.f32())
                                      : reinterpret_cast<const char*>(t.i32());
}
char* Raw(Tensor* t) {
  return t->dtype() == DType::kFloat32 ? reinterpret_cast<char*>(t->f32())
                                       : reinterpret_cast<char*>(t->i32());
}
constexpr int64_t kElem = 4;  // float32 and int32

absl::Status CheckArity(absl::Span<const Tensor* const> in, size_t lo, size_t hi) {
  if (in.size() < lo || in.size() > hi) {
    return absl::InvalidArgumentError(absl::StrCat("got ", in.size(), " inputs"));
  }
  for (const Tensor* t : in) {
    if (t == nullptr) return absl::InvalidArgumentError("an input is null");
  }
  return absl::OkStatus();
}

absl::Status SameDtype(const Tensor& in, const Tensor& out) {
  if (in.dtype() != out.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input is ", DTypeName(in.dtype()),
                                                   " but the output is ", DTypeName(out.dtype())));
  }
  return absl::OkStatus();
}

// Size of dim `name` of `s` (1 for the empty name: "no dim"), or InvalidArgument.
absl::StatusOr<int64_t> DimSize(const Shape& s, const std::string& name, absl::string_view what) {
  if (name.empty()) return 1;
  const int i = s.IndexOf(name);
  if (i < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", s.ToString(), " has no dim '", name, "'"));
  }
  return s.dim(i).size;
}

// For every index of the dims `dst` has besides `dst_dim`, copies `count` elements of `src` along
// `src_dim` from `src_begin` to `dst` along `dst_dim` from `dst_begin`. An empty dim name means the
// tensor has no such dim (count must then be 1). The other dims of both must agree by name and
// size; dtypes must match.
absl::Status CopyAlong(const Tensor& src, const std::string& src_dim, int64_t src_begin,
                       Tensor* dst, const std::string& dst_dim, int64_t dst_begin, int64_t count) {
  RETURN_IF_ERROR(SameDtype(src, *dst));
  const Shape rest = WithoutDim(dst->shape(), dst_dim);
  const Shape src_rest = WithoutDim(src.shape(), src_dim);
  RETURN_IF_ERROR(CheckDimsIn(src_rest, "the input", rest, "the output"));
  RETURN_IF_ERROR(CheckDimsIn(rest, "the output", src_rest, "the input"));
  ASSIGN_OR_RETURN(const int64_t src_n, DimSize(src.shape(), src_dim, "the input"));
  ASSIGN_OR_RETURN(const int64_t dst_n, DimSize(dst->shape(), dst_dim, "the output"));
  if (src_begin < 0 || dst_begin < 0 || count < 0 || src_begin + count > src_n ||
      dst_begin + count > dst_n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copying ", count, " elements from ", src_begin, " of '", src_dim, "' (size ", src_n,
        ") to ", dst_begin, " of '", dst_dim, "' (size ", dst_n, ") does not fit"));
  }
  const int64_t ss = src_dim.empty() ? 0 : src.shape().Strides()[src.shape().IndexOf(src_dim)];
  const int64_t ds = dst_dim.empty() ? 0 : dst->shape().Strides()[dst->shape().IndexOf(dst_dim)];
  const char* s = Raw(src);
  char* d = Raw(dst);
  for (StridedIterator it(rest.Sizes(),
                          {StridesByName(src.shape(), rest), StridesByName(dst->shape(), rest)});
       !it.done(); it.Next()) {
    for (int64_t t = 0; t < count; ++t) {
      std::memcpy(d + (it.offset(1) + (dst_begin + t) * ds) * kElem,
                  s + (it.offset(0) + (src_begin + t) * ss) * kElem, kElem);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FirstDim(const v1::Op& op) {
  if (op.dims_size() < 1) return absl::InvalidArgumentError("needs `dims`");
  return op.dims(0);
}

}  // namespace

absl::Status ReplaceDimsKernel(const v1::Op& /*op*/, absl::Span<const Tensor* const> in,
                               Tensor* out) {
  RETURN_IF_ERROR(CheckArity(in, 1, 1));
  RETURN_IF_ERROR(SameDtype(*in[0], *out));
  if (in[0]->num_elements() != out->num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("the input ", in[0]->shape().ToString(),
                                                   " and the output ", out->shape().ToString(),
                                                   " have different element counts"));
  }
  if (out->num_elements() > 0) std::memcpy(Raw(out), Raw(*in[0]), out->num_elements() * kElem);
  return absl::OkStatus();
}

absl::Status SliceKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(CheckArity(in, 1, 1));
  ASSIGN_OR_RETURN(const std::string dim, FirstDim(op));
  ASSIGN_OR_RETURN(const int64_t n, DimSize(in[0]->shape(), dim, "the input"));
  ASSIGN_OR_RETURN(const DimRange r, KeptRange(op, n));
  const std::string new_dim = StringAttrOr(op, "new_dim", dim);
  ASSIGN_OR_RETURN(const int64_t out_n, DimSize(out->shape(), new_dim, "the output"));
  if (out_n != r.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("keeps ", r.size, " elements but the output's '", new_dim, "' has ", out_n));
  }
  return CopyAlong(*in[0], dim, r.begin, out, new_dim, 0, r.size);
}

absl::Status PadKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(CheckArity(in, 1, 1));
  ASSIGN_OR_RETURN(const std::string dim, FirstDim(op));
  ASSIGN_OR_RETURN(const int64_t n, DimSize(in[0]->shape(), dim, "the input"));
  const std::string new_dim = StringAttrOr(op, "new_dim", dim);
  ASSIGN_OR_RETURN(const int64_t out_n, DimSize(out->shape(), new_dim, "the output"));
  const int64_t before = IntAttrOr(op, "before", 0), after = IntAttrOr(op, "after", 0);
  if (before < 0 || after < 0 || out_n != n + before + after) {
    return absl::InvalidArgumentError(
        absl::StrCat("padding ", n, " by ", before, " and ", after, " does not make ", out_n));
  }
  // The output buffer may hold anything (KernelRunner's contract): zero it, then copy the input.
  std::memset(Raw(out), 0, out->num_elements() * kElem);
  return CopyAlong(*in[0], dim, 0, out, new_dim, before, n);
}

absl::Status ConcatKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(CheckArity(in, 1, 1 << 20));
  if (op.dims_size() != 1 && op.dims_size() != static_cast<int>(in.size())) {
    return absl::InvalidArgumentError("needs one dim name, or one per input, in `dims`");
  }
  const std::string new_dim = StringAttrOr(op, "new_dim", op.dims(0));
  ASSIGN_OR_RETURN(const int64_t out_n, DimSize(out->shape(), new_dim, "the output"));
  int64_t offset = 0;
  for (size_t j = 0; j < in.size(); ++j) {
    const std::string& dim = op.dims(op.dims_size() == 1 ? 0 : static_cast<int>(j));
    ASSIGN_OR_RETURN(const int64_t n, DimSize(in[j]->shape(), dim, "an input"));
    if (offset + n > out_n) break;  // reported below
    RETURN_IF_ERROR(CopyAlong(*in[j], dim, 0, out, new_dim, offset, n));
    offset += n;
  }
  if (offset != out_n) {
    return absl::InvalidArgumentError(absl::StrCat("the inputs' concat dims do not add up to ",
                                                   "the output's '", new_dim, "' (", out_n, ")"));
  }
  return absl::OkStatus();
}

absl::Status StackKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(CheckArity(in, 1, 1 << 20));
  ASSIGN_OR_RETURN(const std::string new_dim, StringAttr(op, "new_dim"));
  ASSIGN_OR_RETURN(const int64_t out_n, DimSize(out->shape(), new_dim, "the output"));
  if (out_n != static_cast<int64_t>(in.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("stacks ", in.size(), " inputs but '", new_dim, "' has size ", out_n));
  }
  for (size_t j = 0; j < in.size(); ++j) {
    RETURN_IF_ERROR(CopyAlong(*in[j], "", 0, out, new_dim, static_cast<int64_t>(j), 1));
  }
  return absl::OkStatus();
}

absl::Status UnstackKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  RETURN_IF_ERROR(CheckArity(in, 1, 1));
  ASSIGN_OR_RETURN(const std::string dim, FirstDim(op));
  ASSIGN_OR_RETURN(const int64_t index, IntAttr(op, "index"));
  return CopyAlong(*in[0], dim, index, out, "", 0, 1);
}

}  // namespace meshrt
