// Einsum kernel throughput against raw cblas_sgemm on the same shapes and buffers, one thread.
//
//   bazel run -c opt //bench:einsum_bench [-- --reps=N]
//
// For each shape the two are measured alternately (sgemm, einsum, sgemm, einsum, ...) so machine
// noise hits both; the table reports medians. The einsum goes through CpuKernels().Run, the path a
// worker takes, including planning and dispatch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "core/ir/tensor.h"
#include "core/ops/kernel_runner.h"
#include "kernels/blas.h"
#include "kernels/cpu_kernels.h"
#include "kernels/einsum.h"
#include "util/median.h"

namespace meshrt {
namespace {

struct BenchCase {
  const char* label;
  const char* a;
  const char* b;
  const char* out;
  // The equivalent raw call: batch x (op(A)[m,k] . op(B)[k,n]), batches at stride m*k etc.
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
  // The einsum's operands are laid out as in the model (strided batches), not as the raw call's
  // contiguous matrices: the same FLOPs, but the results are not comparable element by element.
  bool model_layout = false;
};

Tensor Random(const char* shape, uint32_t seed) {
  Tensor t(DType::kFloat32, *Shape::Parse(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng);
  return t;
}

double Seconds(const std::function<void()>& f, int iters) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
}

int Run(int reps) {
  const kernels::Blas& blas = kernels::GetBlas();
  if (blas.raw_sgemm() == nullptr) {
    std::fprintf(stderr, "OpenBLAS not loaded: %s\n", std::string(blas.status().message()).c_str());
    return 1;
  }
  const BenchCase cases[] = {
      {"[m:512,k:512] x [k,n:512] -> [m,n]", "m:512,k:512", "k:512,n:512", "m:512,n:512", 1, 512,
       512, 512, false, false},
      {"[m:1024,k:1024] x [k,n:1024] -> [m,n]", "m:1024,k:1024", "k:1024,n:1024", "m:1024,n:1024",
       1, 1024, 1024, 1024, false, false},
      {"[m:2048,k:2048] x [k,n:2048] -> [m,n]", "m:2048,k:2048", "k:2048,n:2048", "m:2048,n:2048",
       1, 2048, 2048, 2048, false, false},
      {"[k:1024,m:1024] x [k,n:1024] -> [m,n] (A^T)", "k:1024,m:1024", "k:1024,n:1024",
       "m:1024,n:1024", 1, 1024, 1024, 1024, true, false},
      {"[m:1024,k:1024] x [n:1024,k] -> [n,m] (B^T, C^T)", "m:1024,k:1024", "n:1024,k:1024",
       "n:1024,m:1024", 1, 1024, 1024, 1024, false, true},
      // Attention in the Transformer bench (per worker, dp): logits, weighted values and their
      // gradients, batch x heads = 16 x 8 products of [128 x 32] . [32 x 128] and the like.
      {"[b:128,m:128,k:32] x [b,n:128,k] -> [b,m,n] (B^T)", "b:128,m:128,k:32", "b:128,n:128,k:32",
       "b:128,m:128,n:128", 128, 128, 128, 32, false, true},
      {"[b:128,m:128,k:128] x [b,k,n:32] -> [b,m,n]", "b:128,m:128,k:128", "b:128,k:128,n:32",
       "b:128,m:128,n:32", 128, 128, 32, 128, false, false},
      {"[b:128,k:128,m:128] x [b,k,n:32] -> [b,m,n] (A^T)", "b:128,k:128,m:128", "b:128,k:128,n:32",
       "b:128,m:128,n:32", 128, 128, 32, 128, true, false},
      {"q[b:16,l:128,h:8,d:32] k[b,m:128,h,d] -> [b,h,l,m]", "b:16,l:128,h:8,d:32",
       "b:16,m:128,h:8,d:32", "b:16,h:8,l:128,m:128", 128, 128, 128, 32, false, true, true},
      {"w[b:16,h:8,l:128,m:128] v[b,m,h,d:32] -> [b,l,h,d]", "b:16,h:8,l:128,m:128",
       "b:16,m:128,h:8,d:32", "b:16,l:128,h:8,d:32", 128, 128, 32, 128, false, false, true},
      {"w[b:16,h:8,l:128,m:128] dy[b,l,h,d:32] -> [b,m,h,d]", "b:16,h:8,l:128,m:128",
       "b:16,l:128,h:8,d:32", "b:16,m:128,h:8,d:32", 128, 128, 32, 128, true, false, true},
      {"[b:64,m:256,k:64] x [b,k,n:256] -> [b,m,n]", "b:64,m:256,k:64", "b:64,k:64,n:256",
       "b:64,m:256,n:256", 64, 256, 256, 64, false, false},
      {"[b:8,m:512,k:512] x [b,k,n:512] -> [b,m,n]", "b:8,m:512,k:512", "b:8,k:512,n:512",
       "b:8,m:512,n:512", 8, 512, 512, 512, false, false},
  };
  std::printf("OpenBLAS core: %s, threads: %d (%s)\n", blas.corename().c_str(), blas.threads(),
              blas.reason().c_str());
  std::printf("medians of %d interleaved reps\n\n", reps);
  std::printf("| %-48s | %14s | %15s | %6s | %6s |\n", "shape", "sgemm GFLOP/s", "einsum GFLOP/s",
              "ratio", "copies");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(50, '-').c_str(), std::string(16, '-').c_str(),
              std::string(17, '-').c_str(), std::string(8, '-').c_str(),
              std::string(8, '-').c_str());
  for (const BenchCase& c : cases) {
    Tensor a = Random(c.a, 1), b = Random(c.b, 2);
    Tensor out(DType::kFloat32, *Shape::Parse(c.out));
    Tensor raw_out = out;
    v1::Op op;
    op.set_name("bench");
    op.set_type("einsum");
    const Tensor* inputs[] = {&a, &b};
    const double flops = 2.0 * c.batch * c.m * c.n * c.k;
    const int iters = std::max(1, static_cast<int>(2e9 / flops));  // ~10+ ms per sample

    // The raw call. When the einsum output is [n, m] the equivalent raw call computes C^T.
    const bool out_transposed = std::string(c.out).rfind("n:", 0) == 0;
    auto sgemm = [&] {
      for (int64_t i = 0; i < c.batch; ++i) {
        const float* pa = a.f32() + i * c.m * c.k;
        const float* pb = b.f32() + i * c.k * c.n;
        float* pc = raw_out.f32() + i * c.m * c.n;
        const int lda = c.trans_a ? c.m : c.k, ldb = c.trans_b ? c.k : c.n;
        if (!out_transposed) {
          blas.raw_sgemm()(CblasRowMajor, c.trans_a ? CblasTrans : CblasNoTrans,
                           c.trans_b ? CblasTrans : CblasNoTrans, c.m, c.n, c.k, 1.0f, pa, lda, pb,
                           ldb, 0.0f, pc, c.n);
        } else {
          blas.raw_sgemm()(CblasRowMajor, c.trans_b ? CblasNoTrans : CblasTrans,
                           c.trans_a ? CblasNoTrans : CblasTrans, c.n, c.m, c.k, 1.0f, pb, ldb, pa,
                           lda, 0.0f, pc, c.m);
        }
      }
    };
    auto einsum = [&] {
      const absl::Status s = CpuKernels().Run(op, inputs, &out);
      if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
    };
    kernels::EinsumStats stats;
    if (!kernels::Einsum(inputs, &out, &stats).ok()) return 1;  // warm-up, and what it copied
    sgemm();
    if (!c.model_layout && MaxRelativeError(out, raw_out) > 1e-3) {
      std::fprintf(stderr, "%s: einsum and sgemm disagree\n", c.label);
      return 1;
    }
    std::vector<double> t_sgemm, t_einsum;
    for (int r = 0; r < reps; ++r) {
      t_sgemm.push_back(Seconds(sgemm, iters));
      t_einsum.push_back(Seconds(einsum, iters));
    }
    const double g_sgemm = flops / Median(t_sgemm) / 1e9;
    const double g_einsum = flops / Median(t_einsum) / 1e9;
    std::printf("| %-48s | %14.1f | %15.1f | %6.3f | %6d |\n", c.label, g_sgemm, g_einsum,
                g_einsum / g_sgemm, stats.permute_copies);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) {
  int reps = 11;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--reps=", 7) == 0 && absl::SimpleAtoi(argv[i] + 7, &reps) &&
        reps >= 1) {
      continue;
    }
    std::fprintf(stderr, "usage: %s [--reps=N]\n", argv[0]);
    return 2;
  }
  return meshrt::Run(reps);
}
