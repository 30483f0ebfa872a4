#include "core/ir/slicing.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/logging.h"

namespace meshrt {
namespace {

// Copies the box of `box` elements per dim starting at `src_begin` in a row-major array of
// `src_sizes` to `dst_begin` in a row-major array of `dst_sizes`. All functions below are this
// one copy with different boxes. Trailing dims that the box covers completely in both arrays are
// merged into one memcpy run, so the common case (splitting along a leading axis) is a few large
// copies rather than one per element.
void CopyBox(const char* src, const std::vector<int64_t>& src_sizes,
             const std::vector<int64_t>& src_begin, char* dst,
             const std::vector<int64_t>& dst_sizes, const std::vector<int64_t>& dst_begin,
             const std::vector<int64_t>& box, int64_t elem) {
  const int rank = static_cast<int>(box.size());
  for (int64_t b : box) {
    if (b == 0) return;
  }
  // Element strides of both arrays.
  std::vector<int64_t> src_stride(rank), dst_stride(rank);
  int64_t s = 1, d = 1;
  for (int i = rank - 1; i >= 0; --i) {
    src_stride[i] = s;
    dst_stride[i] = d;
    s *= src_sizes[i];
    d *= dst_sizes[i];
  }
  // `run` elements are contiguous in both arrays from dim `k` on.
  int k = rank;
  int64_t run = 1;
  while (k > 0) {
    const int i = k - 1;
    run *= box[i];
    k = i;
    if (box[i] != src_sizes[i] || box[i] != dst_sizes[i]) break;
  }
  int64_t src_off = 0, dst_off = 0;
  for (int i = 0; i < rank; ++i) {
    src_off += src_begin[i] * src_stride[i];
    dst_off += dst_begin[i] * dst_stride[i];
  }
  // Odometer over dims [0, k).
  std::vector<int64_t> idx(k, 0);
  while (true) {
    std::memcpy(dst + dst_off * elem, src + src_off * elem, run * elem);
    int i = k - 1;
    for (; i >= 0; --i) {
      ++idx[i];
      src_off += src_stride[i];
      dst_off += dst_stride[i];
      if (idx[i] < box[i]) break;
      src_off -= box[i] * src_stride[i];
      dst_off -= box[i] * dst_stride[i];
      idx[i] = 0;
    }
    if (i < 0) return;
  }
}

void CheckSplit(const Shape& shape, int axis, int64_t parts) {
  MESHRT_CHECK(axis >= 0 && axis < shape.rank(), "axis ", axis, " of ", shape.ToString());
  MESHRT_CHECK(parts >= 1 && shape.dim(axis).size % parts == 0, "cannot split dim ",
               shape.dim(axis).name, " of ", shape.ToString(), " into ", parts, " parts");
}

bool LayoutFits(const Shape& shape, const TensorLayout& layout, const Mesh& mesh) {
  if (static_cast<int>(layout.mesh_axis.size()) != shape.rank()) return false;
  for (int a : layout.mesh_axis) {
    if (a != kReplicated && (a < 0 || a >= mesh.ndims())) return false;
  }
  return CheckLayout(shape, layout, mesh, "", "").ok();
}

bool CoordFits(const Mesh& mesh, const std::vector<int64_t>& coord) {
  if (static_cast<int>(coord.size()) != mesh.ndims()) return false;
  for (int i = 0; i < mesh.ndims(); ++i) {
    if (coord[i] < 0 || coord[i] >= mesh.size(i)) return false;
  }
  return true;
}

std::string CoordString(const std::vector<int64_t>& coord) {
  std::string s = "(";
  for (size_t i = 0; i < coord.size(); ++i) absl::StrAppend(&s, i ? "," : "", coord[i]);
  return s + ")";
}

}  // namespace

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return sizeof(float);
    case DType::kInt32:
      return sizeof(int32_t);
  }
  return 4;
}

const void* TensorData(const Tensor& t) {
  return t.dtype() == DType::kFloat32 ? static_cast<const void*>(t.f32())
                                      : static_cast<const void*>(t.i32());
}

void* TensorData(Tensor* t) {
  return t->dtype() == DType::kFloat32 ? static_cast<void*>(t->f32())
                                       : static_cast<void*>(t->i32());
}

int64_t TensorBytes(const Tensor& t) { return t.num_elements() * DTypeSize(t.dtype()); }

Shape WithDimSize(const Shape& shape, int axis, int64_t size) {
  std::vector<Dim> dims = shape.dims();
  dims[axis].size = size;
  return Shape(std::move(dims));
}

Tensor SliceAlongAxis(const Tensor& t, int axis, int64_t parts, int64_t index) {
  CheckSplit(t.shape(), axis, parts);
  Tensor out = Tensor::Uninitialized(
      t.dtype(), WithDimSize(t.shape(), axis, t.shape().dim(axis).size / parts));
  SliceAlongAxisInto(t, axis, parts, index, TensorData(&out));
  return out;
}

void SliceAlongAxisInto(const Tensor& t, int axis, int64_t parts, int64_t index, void* out) {
  CheckSplit(t.shape(), axis, parts);
  MESHRT_CHECK(index >= 0 && index < parts, "piece ", index, " of ", parts);
  const int64_t piece = t.shape().dim(axis).size / parts;
  const std::vector<int64_t> piece_sizes = WithDimSize(t.shape(), axis, piece).Sizes();
  std::vector<int64_t> begin(t.shape().rank(), 0);
  begin[axis] = index * piece;
  const std::vector<int64_t> zero(t.shape().rank(), 0);
  CopyBox(static_cast<const char*>(TensorData(t)), t.shape().Sizes(), begin,
          static_cast<char*>(out), piece_sizes, zero, piece_sizes, DTypeSize(t.dtype()));
}

bool ChunksAreContiguous(const Shape& shape, int axis) {
  for (int i = 0; i < axis && i < shape.rank(); ++i) {
    if (shape.dim(i).size != 1) return false;
  }
  return true;
}

Tensor ConcatAlongAxis(absl::Span<const Tensor* const> pieces, int axis) {
  MESHRT_CHECK(!pieces.empty(), "nothing to concatenate");
  const Tensor& first = *pieces[0];
  MESHRT_CHECK(axis >= 0 && axis < first.shape().rank(), "axis ", axis, " of ",
               first.shape().ToString());
  int64_t total = 0;
  for (const Tensor* p : pieces) {
    MESHRT_CHECK(p->dtype() == first.dtype(), "dtypes differ");
    MESHRT_CHECK(WithDimSize(p->shape(), axis, 1) == WithDimSize(first.shape(), axis, 1),
                 p->shape().ToString(), " vs ", first.shape().ToString());
    total += p->shape().dim(axis).size;
  }
  Tensor out = Tensor::Uninitialized(first.dtype(), WithDimSize(first.shape(), axis, total));
  const int rank = first.shape().rank();
  const std::vector<int64_t> zero(rank, 0);
  std::vector<int64_t> begin(rank, 0);
  for (const Tensor* p : pieces) {
    CopyBox(static_cast<const char*>(TensorData(*p)), p->shape().Sizes(), zero,
            static_cast<char*>(TensorData(&out)), out.shape().Sizes(), begin, p->shape().Sizes(),
            DTypeSize(first.dtype()));
    begin[axis] += p->shape().dim(axis).size;
  }
  return out;
}

void SplitIntoChunks(const Tensor& t, int axis, int64_t parts, void* out) {
  CheckSplit(t.shape(), axis, parts);
  const Shape chunk_shape = WithDimSize(t.shape(), axis, t.shape().dim(axis).size / parts);
  const std::vector<int64_t> chunk_sizes = chunk_shape.Sizes();
  const std::vector<int64_t> zero(t.shape().rank(), 0);
  const int64_t elem = DTypeSize(t.dtype());
  const int64_t chunk_bytes = chunk_shape.num_elements() * elem;
  std::vector<int64_t> begin(t.shape().rank(), 0);
  for (int64_t k = 0; k < parts; ++k) {
    begin[axis] = k * chunk_sizes[axis];
    CopyBox(static_cast<const char*>(TensorData(t)), t.shape().Sizes(), begin,
            static_cast<char*>(out) + k * chunk_bytes, chunk_sizes, zero, chunk_sizes, elem);
  }
}

Tensor ConcatChunks(const void* chunks, DType dtype, const Shape& chunk_shape, int64_t parts,
                    int axis) {
  MESHRT_CHECK(axis >= 0 && axis < chunk_shape.rank() && parts >= 1, "axis ", axis, " of ",
               chunk_shape.ToString(), ", ", parts, " parts");
  Tensor out = Tensor::Uninitialized(
      dtype, WithDimSize(chunk_shape, axis, chunk_shape.dim(axis).size * parts));
  ConcatChunksInto(chunks, dtype, chunk_shape, parts, axis, TensorData(&out));
  return out;
}

void ConcatChunksInto(const void* chunks, DType dtype, const Shape& chunk_shape, int64_t parts,
                      int axis, void* out) {
  MESHRT_CHECK(axis >= 0 && axis < chunk_shape.rank() && parts >= 1, "axis ", axis, " of ",
               chunk_shape.ToString(), ", ", parts, " parts");
  const std::vector<int64_t> chunk_sizes = chunk_shape.Sizes();
  const std::vector<int64_t> out_sizes =
      WithDimSize(chunk_shape, axis, chunk_shape.dim(axis).size * parts).Sizes();
  const std::vector<int64_t> zero(chunk_shape.rank(), 0);
  const int64_t elem = DTypeSize(dtype);
  const int64_t chunk_bytes = chunk_shape.num_elements() * elem;
  std::vector<int64_t> begin(chunk_shape.rank(), 0);
  for (int64_t k = 0; k < parts; ++k) {
    begin[axis] = k * chunk_sizes[axis];
    CopyBox(static_cast<const char*>(chunks) + k * chunk_bytes, chunk_sizes, zero,
            static_cast<char*>(out), out_sizes, begin, chunk_sizes, elem);
  }
}

Tensor ExtractSlice(const Tensor& whole, const TensorLayout& layout, const Mesh& mesh,
                    const std::vector<int64_t>& coord) {
  MESHRT_CHECK(LayoutFits(whole.shape(), layout, mesh), "layout does not fit ",
               whole.shape().ToString(), " on mesh ", mesh.ToString());
  MESHRT_CHECK(CoordFits(mesh, coord), "coordinate ", CoordString(coord), " not in mesh ",
               mesh.ToString());
  Tensor slice = Tensor::Uninitialized(whole.dtype(), SliceShape(whole.shape(), layout, mesh));
  const int rank = whole.shape().rank();
  CopyBox(static_cast<const char*>(TensorData(whole)), whole.shape().Sizes(),
          SliceBegin(whole.shape(), layout, mesh, coord), static_cast<char*>(TensorData(&slice)),
          slice.shape().Sizes(), std::vector<int64_t>(rank, 0), slice.shape().Sizes(),
          DTypeSize(whole.dtype()));
  return slice;
}

absl::Status InsertSlice(const Tensor& slice, const TensorLayout& layout, const Mesh& mesh,
                         const std::vector<int64_t>& coord, Tensor* whole) {
  if (slice.dtype() != whole->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("slice is ", DTypeName(slice.dtype()),
                                                   " but the whole tensor is ",
                                                   DTypeName(whole->dtype())));
  }
  if (!LayoutFits(whole->shape(), layout, mesh)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout does not fit shape ", whole->shape().ToString(), " on mesh ", mesh.ToString()));
  }
  if (!CoordFits(mesh, coord)) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinate ", CoordString(coord), " is not in mesh ", mesh.ToString()));
  }
  const Shape expected = SliceShape(whole->shape(), layout, mesh);
  if (slice.shape() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slice has shape ", slice.shape().ToString(), " but the slice of ",
        whole->shape().ToString(), " at ", CoordString(coord), " is ", expected.ToString()));
  }
  const int rank = slice.shape().rank();
  CopyBox(static_cast<const char*>(TensorData(slice)), slice.shape().Sizes(),
          std::vector<int64_t>(rank, 0), static_cast<char*>(TensorData(whole)),
          whole->shape().Sizes(), SliceBegin(whole->shape(), layout, mesh, coord),
          slice.shape().Sizes(), DTypeSize(slice.dtype()));
  return absl::OkStatus();
}

}  // namespace meshrt
