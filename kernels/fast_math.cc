#include "kernels/fast_math.h"

#include <limits>

namespace meshrt {
namespace kernels {

#define MESHRT_VECTOR_CLONES __attribute__((target_clones(MESHRT_VECTOR_TARGETS)))

namespace {

// Independent partial results let the compiler keep them in vector registers (float addition is
// not associative, so it will not reorder a single accumulator by itself).
constexpr int kLanes = 16;

// Folds in[0..n) with `combine` in kLanes lanes, then the tail, then the lanes, in that order.
template <typename Combine>
inline float Fold(const float* in, int64_t n, float init, Combine combine) {
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = combine(acc[j], in[i + j]);
  }
  float r = init;
  for (; i < n; ++i) r = combine(r, in[i]);
  for (int j = 0; j < kLanes; ++j) r = combine(r, acc[j]);
  return r;
}

}  // namespace

MESHRT_VECTOR_CLONES
void ExpArray(const float* in, float shift, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FastExp(in[i] - shift);
}

MESHRT_VECTOR_CLONES
void ExpDiffArray(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FastExp(a[i] - b[i]);
}

MESHRT_VECTOR_CLONES
void SigmoidArray(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = 1.0f / (1.0f + FastExp(-in[i]));
}

MESHRT_VECTOR_CLONES
float DotArray(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * b[i];
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

MESHRT_VECTOR_CLONES
float SumArray(const float* in, int64_t n) {
  return Fold(in, n, 0.0f, [](float a, float b) { return a + b; });
}

MESHRT_VECTOR_CLONES
float MaxArray(const float* in, int64_t n) {
  return Fold(in, n, -std::numeric_limits<float>::infinity(),
              [](float a, float b) { return a < b ? b : a; });
}

MESHRT_VECTOR_CLONES
float MinArray(const float* in, int64_t n) {
  return Fold(in, n, std::numeric_limits<float>::infinity(),
              [](float a, float b) { return b < a ? b : a; });
}

}  // namespace kernels
}  // namespace meshrt
