#include "kernels/norm_grad.h"

#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ops/reference_kernels.h"
#include "kernels/fast_math.h"
#include "kernels/transpose.h"
#include "util/status_macros.h"

namespace meshrt {
namespace kernels {
namespace {

absl::Status CheckFloat(const Tensor& t, absl::string_view what) {
  if (t.dtype() != DType::kFloat32) {
    return absl::UnimplementedError(absl::StrCat("the fast norm gradient takes float32 only; ",
                                                 what, " is ", DTypeName(t.dtype())));
  }
  return absl::OkStatus();
}

// dx of one contiguous row of n elements. `scale` holds the row's n scale values (or is null);
// `g` is scratch for n floats when it is not. `o` may not alias x or dy. Passes over the row (in
// cache after the first): sum of x, xc into o, sum of xc^2, [g = dy scale], sum of g, sum of
// g xc, and the final write; the statistics are 16-lane float sums.
void GradRow(const float* x, const float* dy, const float* scale, int64_t n, float epsilon,
             bool rms, float* g, float* o) {
  const float count = static_cast<float>(n);
  const float mean = rms ? 0.0f : SumArray(x, n) / count;
  for (int64_t j = 0; j < n; ++j) o[j] = x[j] - mean;
  const float r = 1.0f / std::sqrt(DotArray(o, o, n) / count + epsilon);
  const float* gr = dy;
  if (scale != nullptr) {
    for (int64_t j = 0; j < n; ++j) g[j] = dy[j] * scale[j];
    gr = g;
  }
  const float mean_g = rms ? 0.0f : SumArray(gr, n) / count;
  // mean(g xhat) = r mean(g xc), so dx = r g - r mean(g) - xc r^2 mean(g xhat).
  const float mean_gxhat = r * DotArray(gr, o, n) / count;
  const float a = r, b = r * mean_g, c = r * r * mean_gxhat;
  for (int64_t j = 0; j < n; ++j) o[j] = a * gr[j] - b - c * o[j];
}

// Every row of a [rows, n] row-major layout.
void GradRows(const float* x, const float* dy, const float* scale, int64_t rows, int64_t n,
              float epsilon, bool rms, float* o) {
  std::vector<float> g(scale != nullptr ? n : 0);
  for (int64_t i = 0; i < rows; ++i) {
    GradRow(x + i * n, dy + i * n, scale, n, epsilon, rms, g.data(), o + i * n);
  }
}

// True when, ignoring size-1 dims, every normalised dim of `x` comes after every kept dim: then
// each row (the normalised dims, in x's order) is one contiguous run of memory.
bool RowsContiguous(const Shape& x, const std::set<std::string>& dims) {
  bool seen_normalised = false;
  for (const Dim& d : x.dims()) {
    if (d.size == 1) continue;
    const bool normalised = dims.count(d.name) > 0;
    if (!normalised && seen_normalised) return false;
    seen_normalised = seen_normalised || normalised;
  }
  return true;
}

}  // namespace

absl::Status NormGrad(const Tensor& x, const Tensor* scale, const Tensor& dy,
                      const std::vector<std::string>& dims, float epsilon, bool rms, Tensor* out) {
  RETURN_IF_ERROR(CheckFloat(x, "x"));
  RETURN_IF_ERROR(CheckFloat(dy, "dy"));
  RETURN_IF_ERROR(CheckFloat(*out, "the output"));
  const Shape& xs = x.shape();
  if (dy.shape() != xs) {
    return absl::InvalidArgumentError(absl::StrCat("dy ", dy.shape().ToString(),
                                                   " must have the shape of x ", xs.ToString(),
                                                   " (same dims, same order)"));
  }
  if (out->shape() != xs) {
    return absl::InvalidArgumentError(absl::StrCat("the output ", out->shape().ToString(),
                                                   " must have the shape of x ", xs.ToString()));
  }
  if (dims.empty()) return absl::InvalidArgumentError("no dims to normalise over");
  const std::set<std::string> names(dims.begin(), dims.end());
  if (names.size() != dims.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dims [", absl::StrJoin(dims, ","), "] list a dim twice"));
  }
  std::vector<Dim> kept_dims, norm_dims;
  for (const Dim& d : xs.dims()) (names.count(d.name) ? norm_dims : kept_dims).push_back(d);
  for (const std::string& d : dims) {
    if (!xs.Contains(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("normalises dim '", d, "' but x is ", xs.ToString()));
    }
  }
  const Shape kept(kept_dims), norm(norm_dims);
  if (scale != nullptr) {
    RETURN_IF_ERROR(CheckFloat(*scale, "scale"));
    RETURN_IF_ERROR(CheckDimsIn(scale->shape(), "scale", norm, "the normalised dims of x"));
  }
  const int64_t total = x.num_elements();
  if (total == 0) return absl::OkStatus();
  const int64_t n = norm.num_elements();
  const int64_t rows = total / n;
  // The scale as one vector over the normalised dims in x's order (broadcast where it lacks one).
  std::vector<float> scale_row;
  const float* s = nullptr;
  if (scale != nullptr) {
    if (scale->shape() == norm) {
      s = scale->f32();
    } else {
      scale_row.resize(n);
      PermuteCopy(scale->f32(), scale->shape(), scale_row.data(), norm);
      s = scale_row.data();
    }
  }
  if (RowsContiguous(xs, names)) {
    GradRows(x.f32(), dy.f32(), s, rows, n, epsilon, rms, out->f32());
    return absl::OkStatus();
  }
  // Normalised dims elsewhere (e.g. outermost): transpose x and dy to [kept, normalised], run the
  // contiguous rows, and transpose dx back — three copies instead of strided passes per statistic.
  std::vector<Dim> rows_first = kept_dims;
  rows_first.insert(rows_first.end(), norm_dims.begin(), norm_dims.end());
  const Shape ts(rows_first);
  std::vector<float> xt(total), dyt(total), ot(total);
  PermuteCopy(x.f32(), xs, xt.data(), ts);
  PermuteCopy(dy.f32(), xs, dyt.data(), ts);
  GradRows(xt.data(), dyt.data(), s, rows, n, epsilon, rms, ot.data());
  PermuteCopy(ot.data(), ts, out->f32(), xs);
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace meshrt
