#include "client/hardware_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/blas.h"
#include "util/logging.h"

namespace meshrt {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Best-of-`reps` sgemm rate of an n^3 product, FLOP/s.
double GemmRate(int64_t n, int reps) {
  const kernels::Blas& blas = kernels::GetBlas();
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.f);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    blas.Sgemm(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    best = std::min(best, Seconds(start));
  }
  return 2.0 * n * n * n / std::max(best, 1e-9);
}

HardwareProfile Measure() {
  HardwareProfile p;
  p.source = "measured in process (sgemm, memcpy)";
  p.collectives = DefaultCollectiveLinks();
  p.collectives_measured = false;
  p.gemm_small_flops_per_s = GemmRate(64, 20);
  p.gemm_large_flops_per_s = GemmRate(384, 3);
  p.gemm_large_flops = 2.0 * 256 * 256 * 256;
  {
    std::vector<float> x(1 << 14, 1.f);
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int pass = 0; pass < 16; ++pass) {
        for (float& v : x) v = v * 0.999f + 0.001f;
      }
      best = std::min(best, Seconds(start));
    }
    volatile float sink = x[x.size() / 2];
    (void)sink;
    p.elementwise_flops_per_s = 2.0 * 16 * static_cast<double>(x.size()) / std::max(best, 1e-9);
  }
  {
    const size_t bytes = 32u << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      const auto start = std::chrono::steady_clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      best = std::min(best, Seconds(start));
    }
    p.memory_bytes_per_s = 2.0 * static_cast<double>(bytes) / std::max(best, 1e-9);  // read+write
  }
  LogInfo(absl::StrFormat(
      "hardware profile measured: gemm %.1f GFLOP/s (64^3), %.1f GFLOP/s (384^3), elementwise "
      "%.1f GFLOP/s, memory %.1f GB/s; collective alpha/beta are placeholders",
      p.gemm_small_flops_per_s / 1e9, p.gemm_large_flops_per_s / 1e9,
      p.elementwise_flops_per_s / 1e9, p.memory_bytes_per_s / 1e9));
  return p;
}

}  // namespace

const HardwareProfile& MeasuredHardwareProfile() {
  static const HardwareProfile* profile = new HardwareProfile(Measure());
  return *profile;
}

}  // namespace meshrt
