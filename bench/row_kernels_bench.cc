// The workers' row kernels (layer norm, softmax and the two gradients, add) against memcpy of
// the same input bytes, on the Transformer benchmarks' activation shapes, one thread.
//
//   bazel run -c opt //bench:row_kernels_bench [-- --reps=N]
//
// These kernels read each row a few times in cache and write it once, so the floor a kernel can
// reach is memory traffic: memcpy of its input is the raw reference (1.0 = as fast as copying).
// Each kernel and its memcpy are timed alternately, medians reported. The vector clones the CPU
// runs (kernels/fast_math.h: AVX-512, AVX2 or the baseline) are chosen at load time; the table
// says which this CPU supports.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "bench/bench_util.h"
#include "core/ir/tensor.h"
#include "kernels/elementwise.h"
#include "kernels/norm_grad.h"
#include "kernels/reduce.h"

namespace meshrt {
namespace {

double Seconds(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Tensor Filled(const Shape& shape, float scale) {
  std::vector<float> v(shape.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((i * 7919) % 1000) / 1000;
  return Tensor::Float(shape, std::move(v));
}

void Run(int64_t rows, int64_t width, int reps) {
  const Shape xs{{"tokens", rows}, {"d", width}};
  const Tensor x = Filled(xs, 1.0f), dy = Filled(xs, 0.5f);
  const Tensor scale = Filled(Shape{{"d", width}}, 2.0f), bias = Filled(Shape{{"d", width}}, 0.1f);
  Tensor out = Tensor::Uninitialized(DType::kFloat32, xs);
  Tensor copy = Tensor::Uninitialized(DType::kFloat32, xs);
  const size_t bytes = static_cast<size_t>(x.num_elements()) * sizeof(float);
  struct Kernel {
    const char* name;
    std::function<void()> run;
  };
  const std::vector<Kernel> kernels = {
      {"layer_norm (scale, bias)",
       [&] { bench::CheckOk(kernels::Normalize(x, &scale, &bias, {"d"}, 1e-5f, false, &out)); }},
      {"softmax",
       [&] { bench::CheckOk(kernels::Softmax(x, {"d"}, /*log=*/false, &out)); }},
      {"softmax_grad",
       [&] { bench::CheckOk(kernels::SoftmaxGrad(x, dy, {"d"}, &out)); }},
      {"layer_norm_grad (scale)",
       [&] { bench::CheckOk(kernels::NormGrad(x, &scale, dy, {"d"}, 1e-5f, false, &out)); }},
      {"add", [&] { bench::CheckOk(kernels::Binary(kernels::BinaryOp::kAdd, x, dy, &out)); }},
  };
  for (const Kernel& k : kernels) {
    std::vector<double> kt, ct;
    k.run();
    for (int r = 0; r < reps; ++r) {
      kt.push_back(Seconds(k.run));
      ct.push_back(Seconds([&] { std::memcpy(copy.f32(), x.f32(), bytes); }));
    }
    const double km = Median(kt), cm = Median(ct);
    std::printf("| [%lld, %lld] | %-24s | %8.3f | %8.3f | %5.2f |\n", static_cast<long long>(rows),
                static_cast<long long>(width), k.name, 1e3 * km, 1e3 * cm, km / cm);
  }
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) {
  int reps = 21;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--reps=", 0) == 0 && absl::SimpleAtoi(a.substr(7), &reps) && reps > 0) continue;
    std::fprintf(stderr, "usage: row_kernels_bench [--reps=N] (not '%s')\n", a.c_str());
    return 2;
  }
  __builtin_cpu_init();
  std::printf("vector clones this CPU runs: %s; medians of %d alternating reps\n\n",
              __builtin_cpu_supports("avx512f")  ? "AVX-512"
              : __builtin_cpu_supports("avx2")   ? "AVX2"
                                                 : "the baseline (x86-64-v2)",
              reps);
  std::printf("| shape | kernel | ms | memcpy ms | ratio |\n|---|---|---|---|---|\n");
  meshrt::Run(4096, 256, reps);  // the small Transformer's activations, one worker of 2 (mp)
  meshrt::Run(2048, 512, reps);  // the model-scale Transformer's
  return 0;
}
