// train_bench's report: the header (CPU, load, what was unset, both sides' cores and their sgemm
// peaks), the MLP and Transformer tables (medians, ratios, GFLOP/s per worker as a fraction of
// the peak of the side's own core) and issue 14 item 6's goals as met / MISSED, each with the
// step time it needs and the GEMM floor (bench/gemm_floor.h) that says whether it can be met.
#ifndef MESHRT_BENCH_TRAIN_TABLES_H_
#define MESHRT_BENCH_TRAIN_TABLES_H_

#include <string>
#include <vector>

#include "bench/train_runs.h"

namespace meshrt {
namespace bench {

// The measurements of one configuration over the reps.
struct Result {
  std::vector<double> ours, batched, peer, comm;  // per-run medians, ms
  float loss = 0;                                 // ours, last run
  bool peer_failed = false;
  int peer_killed = 0;  // runs whose ranks were killed at the timeout after reporting
  double ours_seconds = 0, peer_seconds = 0;  // wall time of all runs
  // One worker's products per step as raw OpenBLAS calls (bench/gemm_floor.h), ms; -1 unknown.
  double gemm_floor_ms = -1;
};

struct TablesInput {
  std::vector<TrainConfig> configs;
  std::vector<Result> results;  // one per config
  int64_t reps = 0;
  double minutes = 0;
  bool peers = false;
  std::string peers_skipped;
  std::string environment;  // what was unset
  std::string load_start;   // /proc/loadavg when the bench started
  // Ours: the core the workers should run, why, every candidate's figures, a worker's log line.
  std::string our_core, our_core_how, our_cores, blas_line;
  double our_peak = -1;  // GFLOP/s, sgemm 1024^3, one thread, our_core
  std::string peer_core, peer_core_how, peer_cores, peer_reported_core;
  double peer_peak = -1;  // GFLOP/s, torch.mm 1024^3, one thread, peer_core
  std::string floor_core;  // the OpenBLAS core the GEMM floors ran on
  int cores = 1;           // CPUs the workers share
};

// /proc/loadavg's first three fields.
std::string LoadAverage();

// Prints the report to stdout (Markdown).
void PrintTables(const TablesInput& in);

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_TRAIN_TABLES_H_
