// The reference kernels: naive, obviously-correct loops over the full index space. They are the
// oracle every faster kernel (//kernels) and every distributed run is compared with, so clarity
// wins over speed here. ReferenceKernels() itself is declared in core/ops/kernel_runner.h.
//
// Op semantics (all dims matched by name; only the shapes of the tensors handed to Run are used,
// never op.shape, so slices work as whole tensors do):
//   einsum            out[i] = sum over dims in some input but not in the output of the product
//                     of all inputs; output-only dims broadcast. float32 and int32.
//   add sub mul div minimum maximum
//                     two inputs whose dims are all output dims; broadcast along missing dims.
//                     float32; int32 too except div.
//   relu exp neg      one input with the output's dims (any order). exp: float32 only.
//   scale             x * attrs["scalar"] (f, or i). float32 only.
//   reduce_sum reduce_max reduce_mean
//                     reduce over every input dim not in the output. mean: float32 only.
//   reshape rename_dim  row-major copy; element counts must match.
//   constant          copies op.value() (element counts must match).
// Errors: InvalidArgument naming the op and the dim or count at fault; Unimplemented for an
// unknown op type or an unsupported dtype.
//
// This header also exposes the small index helpers the reference kernels use, so tests and other
// kernels can build on them. All are pure functions or value types: thread-compatible.
#ifndef MESHRT_CORE_OPS_REFERENCE_KERNELS_H_
#define MESHRT_CORE_OPS_REFERENCE_KERNELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"

namespace meshrt {

// For each dim of `index_space`, the row-major stride (in elements) of the dim with the same name
// in `tensor`, or 0 when `tensor` has no such dim (which broadcasts it). Sizes are not compared.
std::vector<int64_t> StridesByName(const Shape& tensor, const Shape& index_space);

// Walks a row-major index space (`sizes`, last varying fastest) and keeps, for each of several
// operands, the element offset sum_d index[d] * strides[operand][d]. An empty `sizes` is a scalar
// space with exactly one point; a size of 0 makes the space empty.
//
//   StridedIterator it(sizes, {strides_a, strides_b});
//   for (; !it.done(); it.Next()) use(a[it.offset(0)], b[it.offset(1)]);
class StridedIterator {
 public:
  // Precondition (CHECKed): every strides vector has sizes.size() entries.
  StridedIterator(std::vector<int64_t> sizes, std::vector<std::vector<int64_t>> strides);

  bool done() const { return done_; }
  int64_t offset(int operand) const { return offsets_[operand]; }
  const std::vector<int64_t>& index() const { return index_; }
  void Next();

 private:
  std::vector<int64_t> sizes_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> index_;
  std::vector<int64_t> offsets_;
  bool done_ = false;
};

// OK when every dim of `sub` appears in `super` with the same size; otherwise InvalidArgument
// naming the dim, e.g. "input 0 has dim 'k' which the output [i:2] lacks". The *_what strings name
// the two shapes in the message.
absl::Status CheckDimsIn(const Shape& sub, absl::string_view sub_what, const Shape& super,
                         absl::string_view super_what);

// Copies `in` into `out`, matching dims by name: out[i] = in[i restricted to in's dims]. Every dim
// of `in` must be in `out` with the same size; dims only in `out` broadcast. Dtypes must match.
// InvalidArgument otherwise, naming the dim.
absl::Status Transpose(const Tensor& in, Tensor* out);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_REFERENCE_KERNELS_H_
