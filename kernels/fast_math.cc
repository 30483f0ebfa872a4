#include "kernels/fast_math.h"

#include <limits>

namespace meshrt {
namespace kernels {

#define MESHRT_VECTOR_CLONES __attribute__((target_clones("avx512f", "arch=haswell", "default")))

namespace {
constexpr int kLanes = 16;
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
float SumArray(const float* in, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += in[i + j];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += in[i];
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
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
float MaxArray(const float* in, int64_t n) {
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = acc[j] < in[i + j] ? in[i + j] : acc[j];
  }
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = m < in[i] ? in[i] : m;
  for (int j = 0; j < kLanes; ++j) m = m < acc[j] ? acc[j] : m;
  return m;
}

}  // namespace kernels
}  // namespace meshrt
