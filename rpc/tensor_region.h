// Where one slice of a tensor lies in the whole tensor's row-major storage, so that the data path
// reads a slice from, and writes it into, the whole tensor in place instead of materialising it.
//
// A slice's own bytes ("slice bytes": its elements row-major in its own shape) lie in the whole
// tensor as runs of run_bytes() contiguous bytes each: a slice of the outermost split dim is one
// run; a slice of an inner dim is one run per index of the dims before it. No gRPC here.
// Value type; thread-compatible.
#ifndef MESHRT_RPC_TENSOR_REGION_H_
#define MESHRT_RPC_TENSOR_REGION_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"

namespace meshrt {

class TensorRegion {
 public:
  // An empty region (no bytes); assign a real one before use.
  TensorRegion() = default;

  // The whole of a tensor of `shape`: one run.
  static TensorRegion Whole(DType dtype, const Shape& shape);
  // The slice of a whole tensor of shape `whole` starting at element offsets `begin` (one per dim)
  // with the sizes of `slice` (the same dim names). InvalidArgument naming both shapes when the
  // ranks or names differ or the box does not fit inside `whole`.
  static absl::StatusOr<TensorRegion> Box(DType dtype, const Shape& whole,
                                          const std::vector<int64_t>& begin, const Shape& slice);
  // The slice the processor at `coord` holds under `layout` (SliceShape / SliceBegin). The
  // coordinator validated the layout and the coordinate: preconditions (CHECKed) as ExtractSlice.
  static TensorRegion OfProcessor(DType dtype, const Shape& whole, const TensorLayout& layout,
                                  const Mesh& mesh, const std::vector<int64_t>& coord);

  DType dtype() const { return dtype_; }
  const Shape& slice_shape() const { return slice_; }
  int64_t bytes() const { return bytes_; }
  // Length of each contiguous run (bytes() when the slice is one run; 0 for an empty slice).
  int64_t run_bytes() const { return run_bytes_; }
  // The whole tensor's size in bytes (a buffer given to Scatter / Gather must hold this many).
  int64_t whole_bytes() const { return whole_bytes_; }

  // Calls fn(whole_offset, slice_offset, length) for each contiguous piece of the slice bytes
  // [begin, begin + length), in slice order (whole_offset: where the piece starts in the whole
  // tensor's storage). Precondition (CHECKed): 0 <= begin, begin + length <= bytes().
  template <typename Fn>
  void ForEachRun(int64_t begin, int64_t length, Fn&& fn) const;

  // Copies the slice bytes [begin, begin + length) from `src` into their places in `whole` (the
  // whole tensor's storage, whole_bytes() long). Same precondition.
  void Scatter(const char* src, int64_t begin, int64_t length, char* whole) const;
  // Copies the slice bytes [begin, begin + length) from their places in `whole` into `dst`.
  void Gather(const char* whole, int64_t begin, int64_t length, char* dst) const;

  // The slice as a tensor of its own (a copy), from `whole` (whose dtype and shape the region was
  // made for; CHECKed by size).
  Tensor Extract(const Tensor& whole) const;

 private:
  void Init(DType dtype, const Shape& whole, const std::vector<int64_t>& begin, Shape slice);
  void CheckRange(int64_t begin, int64_t length) const;

  DType dtype_ = DType::kFloat32;
  Shape slice_;
  int64_t bytes_ = 0;
  int64_t run_bytes_ = 0;
  int64_t whole_bytes_ = 0;
  int64_t base_ = 0;                   // byte offset of the first run in the whole
  // The dims before the run whose slice size exceeds 1 (an odometer over the runs): their slice
  // sizes and byte strides in the whole. Empty: the slice is one run.
  std::vector<int64_t> outer_sizes_;
  std::vector<int64_t> outer_strides_;
};

template <typename Fn>
void TensorRegion::ForEachRun(int64_t begin, int64_t length, Fn&& fn) const {
  CheckRange(begin, length);
  if (length == 0) return;
  if (outer_sizes_.empty()) {  // one run
    fn(base_ + begin, begin, length);
    return;
  }
  const int k = static_cast<int>(outer_sizes_.size());
  int64_t run = begin / run_bytes_;
  int64_t within = begin % run_bytes_;
  // The odometer position of run `run`, and its start in the whole.
  std::vector<int64_t> idx(k);
  int64_t start = base_;
  for (int i = k - 1; i >= 0; --i) {
    idx[i] = run % outer_sizes_[i];
    run /= outer_sizes_[i];
    start += idx[i] * outer_strides_[i];
  }
  int64_t slice_offset = begin;
  while (length > 0) {
    const int64_t n = std::min(length, run_bytes_ - within);
    fn(start + within, slice_offset, n);
    slice_offset += n;
    length -= n;
    within = 0;
    for (int i = k - 1; i >= 0; --i) {
      start += outer_strides_[i];
      if (++idx[i] < outer_sizes_[i]) break;
      start -= idx[i] * outer_strides_[i];
      idx[i] = 0;
    }
  }
}

}  // namespace meshrt

#endif  // MESHRT_RPC_TENSOR_REGION_H_
