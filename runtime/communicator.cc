#include "runtime/communicator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace meshrt {
namespace {

// Signed overflow is undefined behaviour: int32 sums and products wrap, as on the wire.
inline float Add(float a, float b) { return a + b; }
inline int32_t Add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
inline float Mul(float a, float b) { return a * b; }
inline int32_t Mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

template <typename T>
absl::Status ReduceTyped(v1::ReduceOp op, const T* in, T* acc, int64_t count) {
  switch (op) {
    case v1::REDUCE_SUM:
      for (int64_t i = 0; i < count; ++i) acc[i] = Add(acc[i], in[i]);
      return absl::OkStatus();
    case v1::REDUCE_MAX:
      for (int64_t i = 0; i < count; ++i) acc[i] = std::max(acc[i], in[i]);
      return absl::OkStatus();
    case v1::REDUCE_MIN:
      for (int64_t i = 0; i < count; ++i) acc[i] = std::min(acc[i], in[i]);
      return absl::OkStatus();
    case v1::REDUCE_PROD:
      for (int64_t i = 0; i < count; ++i) acc[i] = Mul(acc[i], in[i]);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("invalid reduce op ", static_cast<int>(op),
                       "; use REDUCE_SUM, REDUCE_MAX, REDUCE_MIN or REDUCE_PROD"));
  }
}

}  // namespace

std::string CoordinateString(const std::vector<int64_t>& coord) {
  return absl::StrCat("(", absl::StrJoin(coord, ","), ")");
}

std::string MeshAxesString(const Mesh& mesh, const std::vector<int>& axes) {
  return absl::StrCat("[",
                      absl::StrJoin(axes, ",",
                                    [&mesh](std::string* out, int a) {
                                      if (a >= 0 && a < mesh.ndims()) {
                                        absl::StrAppend(out, mesh.dims()[a].name);
                                      } else {
                                        absl::StrAppend(out, "#", a);
                                      }
                                    }),
                      "]");
}

absl::Status NormalizeMeshAxes(const Mesh& mesh, absl::string_view collective,
                               const std::vector<int>& axes, std::vector<int>* sorted) {
  *sorted = axes;
  std::sort(sorted->begin(), sorted->end());
  for (size_t i = 0; i < sorted->size(); ++i) {
    const int a = (*sorted)[i];
    if (a < 0 || a >= mesh.ndims()) {
      return absl::InvalidArgumentError(absl::StrCat(collective, ": mesh axis ", a,
                                                     " is out of range for mesh ", mesh.ToString(),
                                                     " (", mesh.ndims(), " dims)"));
    }
    if (i > 0 && (*sorted)[i - 1] == a) {
      return absl::InvalidArgumentError(
          absl::StrCat(collective, ": mesh axis ", a, " is repeated in the group"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReduceInto(v1::ReduceOp op, DType dtype, const void* in, void* acc, int64_t count) {
  if (dtype == DType::kFloat32) {
    return ReduceTyped(op, static_cast<const float*>(in), static_cast<float*>(acc), count);
  }
  return ReduceTyped(op, static_cast<const int32_t*>(in), static_cast<int32_t*>(acc), count);
}

namespace {
// `x` mod `g` in [0, g).
int PositiveMod(int64_t x, int g) { return static_cast<int>(((x % g) + g) % g); }
}  // namespace

int PermuteSource(int rank, int g, int shift, bool wrap) {
  const int64_t src = static_cast<int64_t>(rank) - shift;
  if (wrap) return PositiveMod(src, g);
  return src >= 0 && src < g ? static_cast<int>(src) : -1;
}

int PermuteTarget(int rank, int g, int shift, bool wrap) {
  const int64_t dst = static_cast<int64_t>(rank) + shift;
  if (wrap) return PositiveMod(dst, g);
  return dst >= 0 && dst < g ? static_cast<int>(dst) : -1;
}

}  // namespace meshrt
