#include "rpc/tensor_region.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "util/logging.h"

namespace meshrt {

TensorRegion TensorRegion::Whole(DType dtype, const Shape& shape) {
  TensorRegion r;
  r.Init(dtype, shape, std::vector<int64_t>(shape.rank(), 0), shape);
  return r;
}

absl::StatusOr<TensorRegion> TensorRegion::Box(DType dtype, const Shape& whole,
                                               const std::vector<int64_t>& begin,
                                               const Shape& slice) {
  bool fits = whole.rank() == slice.rank() && static_cast<int>(begin.size()) == whole.rank();
  for (int i = 0; fits && i < whole.rank(); ++i) {
    fits = whole.dim(i).name == slice.dim(i).name && begin[i] >= 0 &&
           slice.dim(i).size <= whole.dim(i).size - begin[i];
  }
  if (!fits) {
    std::string at;
    for (int64_t b : begin) absl::StrAppend(&at, at.empty() ? "" : ",", b);
    return absl::InvalidArgumentError(absl::StrCat("a slice of shape ", slice.ToString(), " at (",
                                                   at, ") does not fit in a tensor of shape ",
                                                   whole.ToString()));
  }
  TensorRegion r;
  r.Init(dtype, whole, begin, slice);
  return r;
}

TensorRegion TensorRegion::OfProcessor(DType dtype, const Shape& whole, const TensorLayout& layout,
                                       const Mesh& mesh, const std::vector<int64_t>& coord) {
  absl::StatusOr<TensorRegion> r = Box(dtype, whole, SliceBegin(whole, layout, mesh, coord),
                                       SliceShape(whole, layout, mesh));
  MESHRT_CHECK(r.ok(), r.status().message());
  return *std::move(r);
}

void TensorRegion::Init(DType dtype, const Shape& whole, const std::vector<int64_t>& begin,
                        Shape slice) {
  dtype_ = dtype;
  const int64_t elem = DTypeSize(dtype);
  const int rank = whole.rank();
  bytes_ = slice.num_elements() * elem;
  whole_bytes_ = whole.num_elements() * elem;
  slice_ = std::move(slice);
  outer_sizes_.clear();
  outer_strides_.clear();
  base_ = 0;
  if (bytes_ == 0) {
    run_bytes_ = 0;
    return;
  }
  std::vector<int64_t> stride(rank);
  int64_t s = elem;
  for (int i = rank - 1; i >= 0; --i) {
    stride[i] = s;
    s *= whole.dim(i).size;
    base_ += begin[i] * stride[i];
  }
  // Dims [k, rank) form one run: dim k may be partial, every later dim is whole.
  int k = rank;
  run_bytes_ = elem;
  while (k > 0) {
    const int i = k - 1;
    run_bytes_ *= slice_.dim(i).size;
    k = i;
    if (slice_.dim(i).size != whole.dim(i).size) break;
  }
  for (int i = 0; i < k; ++i) {
    if (slice_.dim(i).size == 1) continue;  // its begin is in base_ already
    outer_sizes_.push_back(slice_.dim(i).size);
    outer_strides_.push_back(stride[i]);
  }
}

void TensorRegion::CheckRange(int64_t begin, int64_t length) const {
  MESHRT_CHECK(begin >= 0 && length >= 0 && length <= bytes_ - begin, "bytes [", begin, ", ",
               begin + length, ") of a ", bytes_, "-byte slice");
}

void TensorRegion::Scatter(const char* src, int64_t begin, int64_t length, char* whole) const {
  ForEachRun(begin, length, [&](int64_t at, int64_t from, int64_t n) {
    std::memcpy(whole + at, src + (from - begin), n);
  });
}

void TensorRegion::Gather(const char* whole, int64_t begin, int64_t length, char* dst) const {
  ForEachRun(begin, length, [&](int64_t at, int64_t to, int64_t n) {
    std::memcpy(dst + (to - begin), whole + at, n);
  });
}

Tensor TensorRegion::Extract(const Tensor& whole) const {
  MESHRT_CHECK(TensorBytes(whole) == whole_bytes_ && whole.dtype() == dtype_,
               "a region of a ", whole_bytes_, "-byte tensor applied to ",
               whole.shape().ToString());
  Tensor slice = Tensor::Uninitialized(dtype_, slice_);
  Gather(static_cast<const char*>(TensorData(whole)), 0, bytes_,
         static_cast<char*>(TensorData(&slice)));
  return slice;
}

}  // namespace meshrt
