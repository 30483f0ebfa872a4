#include "kernels/reduce.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/reference_kernels.h"
#include "core/status_macros.h"
#include "kernels/transpose.h"

namespace meshrt {
namespace kernels {
namespace {

// Independent partial results let the compiler keep them in vector registers (float addition is
// not associative, so it will not reorder a single accumulator by itself).
constexpr int kLanes = 16;

float SumRow(const float* p, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += p[i + j];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += p[i];
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

float MaxRow(const float* p, int64_t n) {
  float acc[kLanes];
  std::fill(acc, acc + kLanes, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = std::max(acc[j], p[i + j]);
  }
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = std::max(m, p[i]);
  for (int j = 0; j < kLanes; ++j) m = std::max(m, acc[j]);
  return m;
}

void AddRow(const float* p, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] += p[j];
}

void MaxIntoRow(const float* p, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = std::max(out[j], p[j]);
}

// Reduces into `out`, whose dims are the kept dims of `in_shape` in the input's order.
void ReduceInOrder(bool is_max, const float* in, const Shape& in_shape, float* out,
                   const Shape& kept) {
  std::fill(out, out + kept.num_elements(),
            is_max ? -std::numeric_limits<float>::infinity() : 0.0f);
  // Out strides are 0 on reduced dims, so fusing merges runs of reduced dims and runs of kept dims.
  const FusedSpace f = Fuse(in_shape.Sizes(), {in_shape.Strides(), StridesByName(kept, in_shape)});
  const int r = static_cast<int>(f.sizes.size());
  if (r == 0) {
    out[0] = is_max ? std::max(out[0], in[0]) : out[0] + in[0];
    return;
  }
  const int64_t n = f.sizes[r - 1];
  const bool last_reduced = f.strides[1][r - 1] == 0;
  std::vector<int64_t> outer_sizes(f.sizes.begin(), f.sizes.end() - 1);
  std::vector<std::vector<int64_t>> outer_strides = {
      std::vector<int64_t>(f.strides[0].begin(), f.strides[0].end() - 1),
      std::vector<int64_t>(f.strides[1].begin(), f.strides[1].end() - 1)};
  for (StridedIterator it(outer_sizes, outer_strides); !it.done(); it.Next()) {
    const float* row = in + it.offset(0);
    float* o = out + it.offset(1);
    if (last_reduced) {
      *o = is_max ? std::max(*o, MaxRow(row, n)) : *o + SumRow(row, n);
    } else if (is_max) {
      MaxIntoRow(row, n, o);
    } else {
      AddRow(row, n, o);
    }
  }
}

}  // namespace

void ReduceRaw(ReduceKind kind, const float* in, const Shape& in_shape, float* out,
               const Shape& out_shape, int64_t* scratch_bytes) {
  std::vector<Dim> kept_dims;
  for (const Dim& d : in_shape.dims()) {
    if (out_shape.Contains(d.name)) kept_dims.push_back(d);
  }
  const Shape kept(std::move(kept_dims));
  const bool is_max = kind == ReduceKind::kMax;
  const int64_t out_n = out_shape.num_elements();
  if (DropUnitDims(kept) == DropUnitDims(out_shape)) {
    ReduceInOrder(is_max, in, in_shape, out, kept);
  } else {
    std::vector<float> tmp(out_n);
    if (scratch_bytes != nullptr) *scratch_bytes += out_n * sizeof(float);
    ReduceInOrder(is_max, in, in_shape, tmp.data(), kept);
    PermuteCopy(tmp.data(), kept, out, out_shape);
  }
  if (kind == ReduceKind::kMean) {
    const float count = static_cast<float>(in_shape.num_elements() / out_n);
    for (int64_t i = 0; i < out_n; ++i) out[i] /= count;
  }
}

absl::Status Reduce(ReduceKind kind, const Tensor& in, Tensor* out) {
  if (in.dtype() != DType::kFloat32 || out->dtype() != DType::kFloat32) {
    return absl::UnimplementedError("the fast reductions take float32 only");
  }
  RETURN_IF_ERROR(CheckDimsIn(out->shape(), "the output", in.shape(), "the input"));
  ReduceRaw(kind, in.f32(), in.shape(), out->f32(), out->shape());
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace meshrt
