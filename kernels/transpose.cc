#include "kernels/transpose.h"

#include <algorithm>
#include <cstring>

#include "core/ops/reference_kernels.h"

namespace meshrt {
namespace kernels {
namespace {

// Square tiles of this many elements per side (32 x 32 floats = 4 KiB) keep both the rows read and
// the rows written of a transpose in L1.
constexpr int64_t kTile = 32;

// The sizes and per-operand strides of `space` without the dims listed in `skip`.
struct Outer {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;
};
Outer WithoutDims(const FusedSpace& space, int skip_a, int skip_b) {
  Outer o;
  o.strides.resize(space.strides.size());
  for (size_t d = 0; d < space.sizes.size(); ++d) {
    if (static_cast<int>(d) == skip_a || static_cast<int>(d) == skip_b) continue;
    o.sizes.push_back(space.sizes[d]);
    for (size_t k = 0; k < space.strides.size(); ++k) o.strides[k].push_back(space.strides[k][d]);
  }
  return o;
}

}  // namespace

Shape DropUnitDims(const Shape& shape) {
  std::vector<Dim> dims;
  for (const Dim& d : shape.dims()) {
    if (d.size != 1) dims.push_back(d);
  }
  return Shape(std::move(dims));
}

FusedSpace Fuse(const std::vector<int64_t>& sizes,
                const std::vector<std::vector<int64_t>>& strides) {
  FusedSpace f;
  f.strides.resize(strides.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = !f.sizes.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k) {
      merge = f.strides[k].back() == strides[k][d] * sizes[d];
    }
    if (merge) {
      f.sizes.back() *= sizes[d];
      for (size_t k = 0; k < strides.size(); ++k) f.strides[k].back() = strides[k][d];
    } else {
      f.sizes.push_back(sizes[d]);
      for (size_t k = 0; k < strides.size(); ++k) f.strides[k].push_back(strides[k][d]);
    }
  }
  return f;
}

template <typename T>
void PermuteCopy(const T* src, const Shape& src_shape, T* dst, const Shape& dst_shape) {
  const FusedSpace f =
      Fuse(dst_shape.Sizes(), {StridesByName(src_shape, dst_shape), dst_shape.Strides()});
  const int r = static_cast<int>(f.sizes.size());
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const std::vector<int64_t>& ss = f.strides[0];
  const std::vector<int64_t>& ds = f.strides[1];
  const int64_t n = f.sizes[r - 1];
  const int64_t s_last = ss[r - 1];  // ds[r - 1] == 1: dst is dense
  int t = -1;                        // the dst dim that is innermost in src, if not the last
  for (int d = 0; d < r - 1; ++d) {
    if (ss[d] == 1) t = d;
  }
  if (s_last <= 1 || t < 0) {
    // Row by row: a contiguous copy, a fill (broadcast), or a strided gather.
    const Outer o = WithoutDims(f, r - 1, -1);
    for (StridedIterator it(o.sizes, o.strides); !it.done(); it.Next()) {
      const T* s = src + it.offset(0);
      T* d = dst + it.offset(1);
      if (s_last == 1) {
        std::memcpy(d, s, n * sizeof(T));
      } else if (s_last == 0) {
        std::fill(d, d + n, *s);
      } else {
        for (int64_t j = 0; j < n; ++j) d[j] = s[j * s_last];
      }
    }
    return;
  }
  // Tiled transpose of dims t (contiguous in src) and r - 1 (contiguous in dst).
  const int64_t m = f.sizes[t];
  const int64_t dt = ds[t];
  const Outer o = WithoutDims(f, t, r - 1);
  for (StridedIterator it(o.sizes, o.strides); !it.done(); it.Next()) {
    const T* s = src + it.offset(0);
    T* d = dst + it.offset(1);
    for (int64_t i0 = 0; i0 < m; i0 += kTile) {
      const int64_t i1 = std::min(m, i0 + kTile);
      for (int64_t j0 = 0; j0 < n; j0 += kTile) {
        const int64_t j1 = std::min(n, j0 + kTile);
        for (int64_t i = i0; i < i1; ++i) {
          for (int64_t j = j0; j < j1; ++j) d[i * dt + j] = s[i + j * s_last];
        }
      }
    }
  }
}

template void PermuteCopy<float>(const float*, const Shape&, float*, const Shape&);
template void PermuteCopy<int32_t>(const int32_t*, const Shape&, int32_t*, const Shape&);

}  // namespace kernels
}  // namespace meshrt
