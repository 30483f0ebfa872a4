// Slicing geometry on dense tensors: cutting a whole tensor into the slice one processor holds,
// putting a slice back, and the split/concatenate primitives the SPMD executor uses to pack and
// unpack collectives along an arbitrary tensor axis.
//
// Everything here is pure (no threads, no I/O) and works for both dtypes. Functions returning a
// Tensor CHECK their preconditions (they are internal invariants of an already-validated program
// or layout); InsertSlice validates and returns a Status because it is fed by assembled results.
#ifndef MESHRT_CORE_IR_SLICING_H_
#define MESHRT_CORE_IR_SLICING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"

namespace meshrt {

// Bytes per element of `dtype` (4 for both float32 and int32).
int64_t DTypeSize(DType dtype);
// The raw row-major storage of `t` (num_elements() * DTypeSize(dtype()) bytes).
const void* TensorData(const Tensor& t);
void* TensorData(Tensor* t);
int64_t TensorBytes(const Tensor& t);

// `shape` with dim `axis` resized to `size` (same name).
Shape WithDimSize(const Shape& shape, int axis, int64_t size);

// Piece `index` of `parts` equal pieces of `t` along tensor axis `axis`: the dim keeps its name
// and has size dim/parts. Preconditions (CHECKed): 0 <= axis < rank, parts >= 1, the dim's size
// divides by `parts`, 0 <= index < parts.
Tensor SliceAlongAxis(const Tensor& t, int axis, int64_t parts, int64_t index);

// Concatenates `pieces` along tensor axis `axis`, in order. Preconditions (CHECKed): non-empty,
// same dtype, same shape except for the size of dim `axis` (whose name must agree too).
Tensor ConcatAlongAxis(absl::Span<const Tensor* const> pieces, int axis);

// Packing for collectives. Writes the `parts` equal pieces of `t` along `axis` one after another
// into `out` (piece 0 first, each piece row-major in its own shape). `out` must hold
// TensorBytes(t) bytes. Same preconditions as SliceAlongAxis.
void SplitIntoChunks(const Tensor& t, int axis, int64_t parts, void* out);

// Unpacking for collectives: reads `parts` contiguous chunks, each a row-major tensor of
// `chunk_shape` and `dtype`, and returns their concatenation along `axis` (the inverse of
// SplitIntoChunks). `chunks` must hold parts * chunk_shape.num_elements() elements.
Tensor ConcatChunks(const void* chunks, DType dtype, const Shape& chunk_shape, int64_t parts,
                    int axis);

// Raw forms of the above for callers that own the destination (the executor writes into pooled
// storage instead of a fresh zero-filled tensor). Same preconditions; `out` must hold the result's
// bytes and must not overlap the source.
//   SliceAlongAxisInto: piece `index` of `parts` of `t` along `axis`, row-major in its own shape.
//   ConcatChunksInto:   the concatenation ConcatChunks returns, row-major in the whole shape.
void SliceAlongAxisInto(const Tensor& t, int axis, int64_t parts, int64_t index, void* out);
void ConcatChunksInto(const void* chunks, DType dtype, const Shape& chunk_shape, int64_t parts,
                      int axis, void* out);

// True when every dim of `shape` before `axis` has size 1: then the equal pieces along `axis` lie
// one after another in the row-major storage, so SplitIntoChunks is the identity and the chunks
// ConcatChunks reads are already the whole tensor (collectives can use the buffer in place).
bool ChunksAreContiguous(const Shape& shape, int axis);

// The slice of `whole` that the processor at `coord` holds under `layout` on `mesh` (shape
// SliceShape(...), starting at SliceBegin(...)). Preconditions (CHECKed): the layout has one entry
// per dim and is valid for the shape (see CheckLayout), coord has one entry per mesh dim and is in
// range.
Tensor ExtractSlice(const Tensor& whole, const TensorLayout& layout, const Mesh& mesh,
                    const std::vector<int64_t>& coord);

// Writes `slice` (the part held at `coord`) into its place in `*whole`. InvalidArgument when the
// dtypes differ, the layout does not fit whole's shape or mesh, the coordinate is out of range, or
// slice's shape is not SliceShape(whole's shape, layout, mesh); `*whole` is untouched then.
absl::Status InsertSlice(const Tensor& slice, const TensorLayout& layout, const Mesh& mesh,
                         const std::vector<int64_t>& coord, Tensor* whole);

}  // namespace meshrt

#endif  // MESHRT_CORE_IR_SLICING_H_
