#include "kernels/scaled_add.h"

#include <immintrin.h>

#include <cstdint>

namespace meshrt {
namespace kernels {
namespace {

__attribute__((optimize("fp-contract=off"))) void Scalar(const float* x, const float* y, float s,
                                                         float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float t = y[i] * s;
    o[i] = x[i] + t;
  }
}

// SSE (every x86-64 CPU has it): mulps then addps round exactly as the scalar loop does.
void Streaming(const float* x, const float* y, float s, float* o, int64_t n) {
  int64_t i = 0;
  // Scalar until `o` is 16-byte aligned (_mm_stream_ps needs it).
  while (i < n && (reinterpret_cast<uintptr_t>(o + i) & 15) != 0) {
    const float t = y[i] * s;
    o[i] = x[i] + t;
    ++i;
  }
  const __m128 vs = _mm_set1_ps(s);
  for (; i + 4 <= n; i += 4) {
    const __m128 t = _mm_mul_ps(_mm_loadu_ps(y + i), vs);
    _mm_stream_ps(o + i, _mm_add_ps(_mm_loadu_ps(x + i), t));
  }
  _mm_sfence();  // the streamed lines are visible before anyone reads `o`
  Scalar(x + i, y + i, s, o + i, n - i);
}

}  // namespace

void ScaledAdd(const float* x, const float* y, float s, float* o, int64_t n) {
  if (n * static_cast<int64_t>(sizeof(float)) >= kStreamingBytes) {
    Streaming(x, y, s, o, n);
  } else {
    Scalar(x, y, s, o, n);
  }
}

}  // namespace kernels
}  // namespace meshrt
