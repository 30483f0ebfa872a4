// Choosing OpenBLAS's core (kernel family) by measurement, not by the CPU's vendor or flags.
//
// OpenBLAS reads OPENBLAS_CORETYPE once, when it loads, so each candidate core is measured in a
// child process: this binary re-executed (/proc/self/exe) with MESHRT_BLAS_PROBE_CORE set, which
// a static initializer of this library sees before main() runs: the child loads OpenBLAS with that
// core, checks cblas_sgemm against a double-precision loop on small, odd, transposed, accumulating
// and batched (strided sub-matrix) shapes, times a 1024^3 sgemm on one thread (best of 3 after a
// warm-up), prints one line and exits. A child that crashes (an instruction the CPU lacks), hangs
// (killed after the timeout) or computes wrongly is not chosen. The fastest correct core wins.
//
// The result is cached per CPU model, OpenBLAS library (path, size, mtime) and candidate list, in
// $MESHRT_BLAS_CACHE_DIR or /tmp/meshrt-blas-<uid>/, so a machine measures once (~0.5 s) and
// every later process — every worker of a cluster, every test — makes the same choice. One
// process measures at a time (flock); the others wait and read its result.
//
// Thread-safety: thread-compatible; MeasureCores forks and execs (safe from a multithreaded
// process: the child only calls execve).
#ifndef MESHRT_KERNELS_BLAS_PROBE_H_
#define MESHRT_KERNELS_BLAS_PROBE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/blas.h"

namespace meshrt {
namespace kernels {

struct CoreMeasurement {
  std::string requested;  // the OPENBLAS_CORETYPE asked for
  std::string corename;   // what OpenBLAS said it runs ("" when the child failed)
  bool correct = false;   // every checked shape within tolerance
  double gflops = 0;      // sgemm 1024^3, one thread
  std::string error;      // why it failed ("" when it ran)
};

// /proc/cpuinfo's first "model name" ("Intel(R) Xeon(R) Processor"); "unknown" without one.
std::string CpuModelName();

// The cores worth measuring on `cpu`: Haswell and Zen with AVX2+FMA, SkylakeX and Cooperlake
// with AVX-512 (F, DQ, BW, VL). Empty: nothing to choose from (OpenBLAS's own detection).
std::vector<std::string> CandidateCores(const CpuFeatures& cpu);

// Measures each candidate in a child process (see the file comment). `library`: the OpenBLAS to
// load (e.g. "libopenblas.so.0"). Never fails as a whole: failures are per core.
std::vector<CoreMeasurement> MeasureCores(const std::string& library,
                                          const std::vector<std::string>& candidates,
                                          absl::Duration timeout = absl::Seconds(20));

// The fastest correct measurement; nullptr when none is.
const CoreMeasurement* FastestCorrect(const std::vector<CoreMeasurement>& measured);

// "SkylakeX 255.1, Cooperlake 228.0, Haswell 135.2, Zen 127.3 GFLOP/s (sgemm 1024^3, 1 thread)".
std::string DescribeMeasurements(const std::vector<CoreMeasurement>& measured);

// The cache file's text: one "<requested> <corename or -> <correct 0/1> <GFLOP/s>" line per core.
std::string SerializeMeasurements(const std::vector<CoreMeasurement>& cores);
// Reads `path` written by WriteMeasurements; false when it is missing, empty or malformed. A core
// whose child failed comes back with error "failed when measured".
bool ReadMeasurements(const std::string& path, std::vector<CoreMeasurement>* cores);
// Writes `cores` to `path` through a temporary file and a rename (readers never see half a file);
// false (and nothing left behind) when that fails.
bool WriteMeasurements(const std::string& path, const std::vector<CoreMeasurement>& cores);

struct MeasuredCores {
  std::vector<CoreMeasurement> cores;
  std::string cache_file;  // where they are cached ("" when caching failed)
  bool from_cache = false;
};

// The candidates' measurements for this CPU and `library`: from the cache, else (when `measure`)
// measured now and cached. NotFound when there is nothing cached and `measure` is false;
// FailedPrecondition when there are no candidates.
absl::StatusOr<MeasuredCores> MeasuredCoresFor(const std::string& library, const CpuFeatures& cpu,
                                               bool measure);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_BLAS_PROBE_H_
