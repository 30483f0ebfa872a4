// Small helpers the benchmark binaries share. Benchmarks fork their ranks, so errors end the
// process at once with a message instead of unwinding.
#ifndef MESHRT_BENCH_BENCH_UTIL_H_
#define MESHRT_BENCH_BENCH_UTIL_H_

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "util/median.h"  // Median, for the benchmarks that include this

namespace meshrt {
namespace bench {

// Prints "<program>: <what>" to stderr and exits with status 1.
[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
  _exit(1);
}

inline void CheckOk(const absl::Status& s) {
  if (!s.ok()) Die(s.ToString());
}

// Where the PyTorch peer scripts are: $MESHRT_PEERS_DIR, else shared/peers beside the checkout
// (`bazel run` sets BUILD_WORKSPACE_DIRECTORY to the checkout), else ../shared/peers.
inline std::string DefaultPeersDir() {
  if (const char* dir = std::getenv("MESHRT_PEERS_DIR"); dir != nullptr && *dir) return dir;
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY"); ws != nullptr && *ws) {
    return std::string(ws) + "/../shared/peers";
  }
  return "../shared/peers";
}


// A Gloo reduce function: elementwise max of doubles (to agree on the slowest rank's time).
inline void MaxDoubles(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<double*>(c)[i] =
        std::max(static_cast<const double*>(a)[i], static_cast<const double*>(b)[i]);
  }
}

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_BENCH_UTIL_H_
