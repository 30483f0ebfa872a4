// OpenBLAS, loaded at run time.
//
// Why at run time: OpenBLAS 0.3.21 does not recognise this project's CPUs and falls back to its
// slow SSE3 "Prescott" kernel (~33 instead of ~157 GFLOP/s per core). OPENBLAS_CORETYPE selects the
// kernel, but the library reads it only once, when it loads. Linking libopenblas would load it
// before main(); dlopen lets us choose the core type first. Nothing links -lopenblas.
//
// Core type, decided once before dlopen:
//   MESHRT_BLAS_CORETYPE=auto     meshrt chooses by measurement (below), even over
//                                 OPENBLAS_CORETYPE
//   MESHRT_BLAS_CORETYPE=default  leave OPENBLAS_CORETYPE and OpenBLAS's own detection alone
//   MESHRT_BLAS_CORETYPE=<name>   sets OPENBLAS_CORETYPE=<name> (e.g. Haswell)
//   unset, OPENBLAS_CORETYPE set  respected (some machines force one because older OpenBLAS builds
//                                 computed wrong results on them); the log line then names the
//                                 measured best core, if this machine has measured it
//   otherwise                     by measurement: every core this CPU can run is timed on a GEMM
//                                 probe in a child process after its results are checked, and
//                                 the fastest correct one is chosen (kernels/blas_probe.h; cached
//                                 per CPU model and OpenBLAS build). Only if that fails, the CPU's
//                                 flags: AVX-512 F+DQ+BW+VL -> SkylakeX; AVX2+FMA -> Haswell.
// Never by vendor name: OpenBLAS's fastest core differed by 1.9x between two AMD CPUs.
// Threads: MESHRT_BLAS_THREADS (>= 1), default 1 (workers run one process per core).
//
// Thread-safety: GetBlas() initialises once (std::call_once) and may be called from any thread;
// the Blas object is immutable afterwards and Sgemm may be called concurrently. Loading calls
// setenv, so the first GetBlas() should not race with other threads reading the environment.
#ifndef MESHRT_KERNELS_BLAS_H_
#define MESHRT_KERNELS_BLAS_H_

#include <cblas.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace meshrt {
namespace kernels {

// CPU features relevant to the core choice (filled from __builtin_cpu_supports).
struct CpuFeatures {
  bool avx512f = false;
  bool avx512dq = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx2 = false;
  bool fma = false;
  bool amd = false;  // vendor AuthenticAMD

  static CpuFeatures Detect();
  bool HasAvx512() const { return avx512f && avx512dq && avx512bw && avx512vl; }
};

// What to do with OPENBLAS_CORETYPE before loading, and why (for the log line).
struct CoretypeChoice {
  std::optional<std::string> set_coretype;  // value for OPENBLAS_CORETYPE, or leave it alone
  std::string reason;                       // e.g. "chosen by meshrt: CPU has AVX-512"
};

// Pure decision from the two environment values (nullptr = unset) and the CPU. No side effects.
CoretypeChoice ChooseCoretype(const char* meshrt_coretype, const char* openblas_coretype,
                              const CpuFeatures& cpu);

struct BlasOptions {
  // Libraries tried in order with dlopen.
  std::vector<std::string> libraries = {"libopenblas.so.0", "libopenblas.so"};
  // Choose the core (above) and set OPENBLAS_CORETYPE before dlopen.
  bool choose_coretype = true;
  // Choose by measurement (kernels/blas_probe.h) when no core is forced.
  bool measure = true;
  // Threads for OpenBLAS's own pool; 0 = MESHRT_BLAS_THREADS or 1.
  int threads = 0;
};

// A loaded OpenBLAS (or, when loading failed, a plain C++ loop GEMM with the same contract).
// Immutable after construction; thread-safe. The library is never unloaded (OpenBLAS keeps
// threads).
class Blas {
 public:
  // Loads per `options` and logs one line naming the core, thread count and reason. A failure is
  // recorded in status() and logged as a warning; Sgemm then uses the loop fallback.
  explicit Blas(const BlasOptions& options);
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // OK when OpenBLAS is loaded; otherwise why not (FailedPrecondition).
  const absl::Status& status() const { return status_; }
  bool loaded() const { return status_.ok(); }
  // openblas_get_corename(), e.g. "SkylakeX"; "none" when not loaded.
  const std::string& corename() const { return corename_; }
  // openblas_get_config(), e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."; "" when not loaded.
  const std::string& config() const { return config_; }
  int threads() const { return threads_; }
  const std::string& reason() const { return reason_; }

  // Row-major C = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T; op(A) is m x k, op(B) is
  // k x n, C is m x n. lda/ldb/ldc are row strides of the stored matrices (A stored k x m when
  // trans_a). Precondition: dimensions fit in int32, ld >= stored row length.
  void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) const;

  // The raw cblas_sgemm entry point (nullptr when not loaded), for benchmarks that compare with it.
  // Declared by <cblas.h> only for its type: calling cblas_sgemm directly would fail to link.
  using SgemmFn = decltype(&cblas_sgemm);
  SgemmFn raw_sgemm() const { return sgemm_; }

 private:
  absl::Status status_;
  std::string corename_ = "none";
  std::string config_;
  std::string reason_;
  int threads_ = 1;
  SgemmFn sgemm_ = nullptr;
};

// The plain C++ GEMM (same contract as Blas::Sgemm) used when OpenBLAS is missing, and by the
// einsum kernel for products too small to be worth a BLAS call.
void LoopSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc);

// The process-wide instance, loaded on first use with default BlasOptions. Never fails (check
// status() to learn whether OpenBLAS or the fallback runs). Lives forever.
const Blas& GetBlas();

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_BLAS_H_
