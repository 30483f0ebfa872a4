// The PyTorch peer's OpenBLAS core, chosen the way kernels/blas_probe.h chooses ours, so that
// train_bench's ratios never come from the kernel choice: every candidate core this CPU can run
// (kernels::CandidateCores, the same list) is measured in a fresh process,
//   OPENBLAS_CORETYPE=<core> /usr/bin/python3 bench/peer_core_probe.py
// which checks torch.mm / addmm / bmm against a float64 reference on small, odd, transposed,
// strided, accumulating and batched shapes and times torch.mm at 1024^3 on one thread (best of 3
// after a warm-up, as blas_probe times cblas_sgemm); the fastest correct core wins. The
// measurements are cached beside ours (`cache_dir`, the directory blas_probe uses), keyed by the
// CPU model, the interpreter, the system BLAS torch loads (Debian: libblas.so.3's file, size and
// mtime) and the candidate list.
//
// Thread-safety: thread-compatible (runs child processes with popen).
#ifndef MESHRT_BENCH_PEER_CORES_H_
#define MESHRT_BENCH_PEER_CORES_H_

#include <string>
#include <vector>

#include "kernels/blas_probe.h"

namespace meshrt {
namespace bench {

// The probe's output for `requested` as a measurement: corename, correct and gflops from its
// "corename=X correct=N error=E gflops=G ..." line; `error` says why not when the probe printed
// "error=..." , nothing parseable, or wrong results.
kernels::CoreMeasurement ParsePeerProbe(const std::string& requested, const std::string& output);

// Runs the probe once with OPENBLAS_CORETYPE=`core` (OPENBLAS_NUM_THREADS and OPENBLAS_L2_SIZE
// removed), killed after `timeout_seconds`.
kernels::CoreMeasurement MeasurePeerCore(const std::string& python, const std::string& script,
                                         const std::string& core, int timeout_seconds = 120);

struct PeerCores {
  std::vector<kernels::CoreMeasurement> cores;
  std::string cache_file;  // "" when not cached (no usable directory)
  bool from_cache = false;
};

// The candidates' measurements: from `cache_dir`'s file when it holds all of them, else measured
// now and cached there (only in a directory of our own that nobody else may write, as blas_probe).
PeerCores PeerCoresFor(const std::string& python, const std::string& script,
                       const std::vector<std::string>& candidates, const std::string& cache_dir);

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_PEER_CORES_H_
