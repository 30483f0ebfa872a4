#include "kernels/blas.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/blas_probe.h"
#include "util/logging.h"

namespace meshrt {
namespace kernels {
namespace {

constexpr char kOverrideHint[] = "override with MESHRT_BLAS_CORETYPE";

int ThreadsFromEnv() {
  const char* text = std::getenv("MESHRT_BLAS_THREADS");
  if (text == nullptr || *text == '\0') return 1;
  int n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < 1) {
    LogWarning("MESHRT_BLAS_THREADS='", text, "' is not an integer >= 1; using 1 thread");
    return 1;
  }
  return n;
}

// "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY ..." -> "OpenBLAS 0.3.21".
std::string VersionOf(const std::string& config) {
  std::vector<std::string> words = absl::StrSplit(config, ' ', absl::SkipEmpty());
  if (words.size() > 2) words.resize(2);
  return words.empty() ? std::string("OpenBLAS") : absl::StrJoin(words, " ");
}

}  // namespace

// i-p-j order: the inner loop runs along rows of B and C.
void LoopSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* crow = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) crow[j] = beta == 0.0f ? 0.0f : beta * crow[j];
    for (int64_t p = 0; p < k; ++p) {
      const float av = alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]);
      if (trans_b) {
        for (int64_t j = 0; j < n; ++j) crow[j] += av * b[j * ldb + p];
      } else {
        const float* brow = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
      }
    }
  }
}

CpuFeatures CpuFeatures::Detect() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.amd = __builtin_cpu_is("amd");
  return f;
}

CoretypeChoice ChooseCoretype(const char* meshrt_coretype, const char* openblas_coretype,
                              const CpuFeatures& cpu) {
  const bool has_meshrt = meshrt_coretype != nullptr && *meshrt_coretype != '\0';
  const bool has_openblas = openblas_coretype != nullptr && *openblas_coretype != '\0';
  if (has_meshrt) {
    const std::string v = meshrt_coretype;
    if (v == "default") {
      return {
          std::nullopt,
          has_openblas
              ? absl::StrCat("MESHRT_BLAS_CORETYPE=default: OpenBLAS decides, OPENBLAS_CORETYPE=",
                             openblas_coretype)
              : "MESHRT_BLAS_CORETYPE=default: OpenBLAS's own CPU detection"};
    }
    if (v != "auto") return {v, absl::StrCat("set by MESHRT_BLAS_CORETYPE=", v)};
    // "auto": our choice below, even over OPENBLAS_CORETYPE.
  } else if (has_openblas) {
    return {std::nullopt, absl::StrCat("OPENBLAS_CORETYPE=", openblas_coretype,
                                       " set by the user; ", kOverrideHint)};
  }
  if (cpu.HasAvx512()) {
    return {"SkylakeX", absl::StrCat("chosen by meshrt from the CPU's flags: CPU has AVX-512; ",
                                     kOverrideHint)};
  }
  if (cpu.avx2 && cpu.fma) {
    return {"Haswell", absl::StrCat("chosen by meshrt from the CPU's flags: CPU has AVX2+FMA; ",
                                    kOverrideHint)};
  }
  return {std::nullopt, absl::StrCat("OpenBLAS's own detection: CPU has neither AVX-512 nor "
                                     "AVX2+FMA; ",
                                     kOverrideHint)};
}

Blas::Blas(const BlasOptions& options) {
  threads_ = options.threads > 0 ? options.threads : ThreadsFromEnv();
  if (options.choose_coretype) {
    const char* meshrt_coretype = std::getenv("MESHRT_BLAS_CORETYPE");
    const char* openblas_coretype = std::getenv("OPENBLAS_CORETYPE");
    const CpuFeatures cpu = CpuFeatures::Detect();
    CoretypeChoice choice = ChooseCoretype(meshrt_coretype, openblas_coretype, cpu);
    const std::string meshrt_value = meshrt_coretype != nullptr ? meshrt_coretype : "";
    const bool forced = (!meshrt_value.empty() && meshrt_value != "auto") ||
                        (meshrt_value.empty() && openblas_coretype != nullptr &&
                         *openblas_coretype != '\0');
    const std::string library = options.libraries.empty() ? "" : options.libraries[0];
    if (!forced && options.measure && !library.empty()) {
      // The choice by measurement (kernels/blas_probe.h); the flags' choice only if that fails.
      absl::StatusOr<MeasuredCores> measured = MeasuredCoresFor(library, cpu, /*measure=*/true);
      const CoreMeasurement* best = measured.ok() ? FastestCorrect(measured->cores) : nullptr;
      if (best != nullptr) {
        choice = {best->requested,
                  absl::StrCat("chosen by measurement: ", DescribeMeasurements(measured->cores),
                               measured->from_cache ? "; cached in " : "; measured now, cached in ",
                               measured->cache_file.empty() ? "(nowhere)" : measured->cache_file,
                               "; ", kOverrideHint)};
      } else {
        absl::StrAppend(&choice.reason, " (no correct core measured: ",
                        measured.ok() ? DescribeMeasurements(measured->cores)
                                      : std::string(measured.status().message()),
                        ")");
      }
    } else if (forced && !library.empty()) {
      // Honoured; but say what the measured best would be, if this machine measured it already.
      const std::string forced_core =
          !meshrt_value.empty() ? meshrt_value : std::string(openblas_coretype);
      absl::StatusOr<MeasuredCores> measured = MeasuredCoresFor(library, cpu, /*measure=*/false);
      const CoreMeasurement* best = measured.ok() ? FastestCorrect(measured->cores) : nullptr;
      if (best != nullptr && best->requested != forced_core) {
        absl::StrAppend(&choice.reason, "; measured best on this CPU: ", best->requested, " (",
                        DescribeMeasurements(measured->cores),
                        "): unset OPENBLAS_CORETYPE or set MESHRT_BLAS_CORETYPE=auto to use it");
      }
    }
    reason_ = choice.reason;
    // The variable only matters if this dlopen is the one that initialises the library.
    bool already_loaded = false;
    for (const std::string& lib : options.libraries) {
      if (void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        already_loaded = true;
        dlclose(h);
      }
    }
    if (choice.set_coretype.has_value()) {
      if (already_loaded) {
        absl::StrAppend(&reason_, "; too late: OpenBLAS was already loaded, so ",
                        *choice.set_coretype, " was not applied");
      } else {
        setenv("OPENBLAS_CORETYPE", choice.set_coretype->c_str(), /*overwrite=*/1);
      }
    }
  } else {
    reason_ = "core type left to OpenBLAS (BlasOptions::choose_coretype=false)";
  }

  void* handle = nullptr;
  std::string tried;
  for (const std::string& lib : options.libraries) {
    handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* err = dlerror();
    absl::StrAppend(&tried, tried.empty() ? "" : "; ", err != nullptr ? err : lib);
  }
  if (handle == nullptr) {
    status_ = absl::FailedPreconditionError(absl::StrCat(
        "cannot load OpenBLAS (", tried, "); install libopenblas-dev (tools/setup.sh)"));
    LogWarning(status_.message(), ". GEMM falls back to a slow C++ loop.");
    return;
  }
  // dlsym returns void*; POSIX guarantees the conversion to a function pointer works.
  auto sgemm = reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm"));
  auto get_corename = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_corename"));
  auto get_config = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_config"));
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(handle, "openblas_set_num_threads"));
  if (sgemm == nullptr || get_corename == nullptr || get_config == nullptr ||
      set_threads == nullptr) {
    status_ = absl::FailedPreconditionError(
        "the loaded BLAS lacks cblas_sgemm or the openblas_get_corename/openblas_get_config/"
        "openblas_set_num_threads entry points; is it OpenBLAS?");
    LogWarning(status_.message(), " GEMM falls back to a slow C++ loop.");
    return;
  }
  set_threads(threads_);
  sgemm_ = sgemm;
  corename_ = get_corename() != nullptr ? get_corename() : "unknown";
  config_ = get_config() != nullptr ? get_config() : "";
  LogInfo(VersionOf(config_), " core=", corename_, " threads=", threads_, " (", reason_, ")");
  if (corename_ == "Prescott" && CpuFeatures::Detect().HasAvx512()) {
    LogWarning(
        "OpenBLAS runs its slow Prescott kernel on an AVX-512 CPU (~5x slower sgemm); set "
        "MESHRT_BLAS_CORETYPE=auto before the process starts");
  }
}

void Blas::Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) const {
  if (m <= 0 || n <= 0) return;
  if (sgemm_ == nullptr || k <= 0) {  // k == 0 only scales C; no need to bother BLAS
    LoopSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  MESHRT_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
                   ldc <= INT_MAX,
               "GEMM too large for 32-bit BLAS: m=", m, " n=", n, " k=", k);
  sgemm_(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
         static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
         static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

const Blas& GetBlas() {
  static std::once_flag once;
  static const Blas* blas = nullptr;
  std::call_once(once, [] { blas = new Blas(BlasOptions()); });
  return *blas;
}

}  // namespace kernels
}  // namespace meshrt
