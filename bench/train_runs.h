// One timed run of a train_bench configuration: ours on a fresh local cluster of worker
// processes, or the PyTorch peer script; and the perf helpers of `--perf_dir`. Errors end the
// benchmark with a message (bench/bench_util.h's rule), except a failing peer, which is reported.
#ifndef MESHRT_BENCH_TRAIN_RUNS_H_
#define MESHRT_BENCH_TRAIN_RUNS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "models/train.h"

namespace meshrt {
namespace bench {

// What train_bench measures.
struct TrainConfig {
  std::string model;  // mlp | transformer
  std::string size;   // transformer: "small" (models::BenchConfig) or "model" (ModelScaleBenchConfig)
  std::string name;   // dp, mp, dpmp
  std::string mesh;
  std::string layout;
  int workers = 2;
  std::string peer_args;  // appended to the peer script's command line
  std::string peer_name;  // how the table names the peer
  double goal = 0;        // mlp: ours/peer step time <= goal; transformer: tokens/s ratio >= goal
  double flops = 0;       // model FLOPs per step (bench/train_flops.h)
  double tokens = 0;      // transformer: tokens per step
  int64_t steps = 30;     // timed steps per run (also the peer's --steps)
  int64_t warmup = 5;     // untimed steps first (also the peer's --warmup)
};

struct RunOptions {
  bool explain = false;
  std::string overlap_comm = "auto";  // the workers' --overlap_comm: auto, true or false
  bool batched = true;       // RunOurs also times the steps in one request (OursRun::batched_ms)
  std::string peers_dir;     // mlp_bench.py, transformer_bench.py
  std::string python;        // the peers' interpreter
  std::string peer_coretype;  // OPENBLAS_CORETYPE for the peer ("" = OpenBLAS's own detection)
  // Seconds before a peer run's ranks are killed (the script 30 s later); 0: 120 + (warmup + steps) * a per-step
  // allowance (mlp 2 s, small 4 s, model 15 s: >= 10x a quiet machine's step). The MLP's DDP
  // peer sometimes hangs in its teardown (rank 0 in destroy_process_group after its results are
  // queued; nothing is printed until it ends), so waiting long only wastes the run.
  int64_t peer_timeout = 0;
};

// One run of ours: per-step times (RunSteps(1) each) and the per-step time of the same number of
// steps in one request.
struct OursRun {
  double median_ms = -1;
  double batched_ms = -1;  // RunSteps(steps) total / steps; -1 when not measured
  float loss = 0;
  std::string blas;  // the first worker log's OpenBLAS line
};

struct PeerRun {
  double median_ms = -1;
  double comm_ms = -1;
  std::string core;   // OpenBLAS core the peer reports
  std::string error;  // non-empty: the run failed
  std::string note;   // e.g. "killed the ranks of the peer after 190 s" (its timeout)
};

double Median(std::vector<double> v);  // -1 for none

// models::BenchConfig() for "small", models::ModelScaleBenchConfig() for "model".
models::TransformerOptions TransformerOf(const std::string& size);

// Runs `c` of ours on a fresh local cluster (stopped afterwards). With `perf_out`, perf records
// the workers during the timed steps (and the one-request run is skipped).
OursRun RunOurs(const TrainConfig& c, const models::TrainGraph& tg, const RunOptions& o,
                const std::string& perf_out = "");

// Runs `configs` (all of one model graph `tg` and one worker count) on one fresh local cluster,
// one session at a time in turn (odd rounds in reverse order), `rounds` times: per config, the
// median over rounds of each
// session's median step (its warmup, then its timed steps of one request each). Layouts compared
// this way share the cluster, its processes' placement and the same minutes of a shared machine.
std::vector<double> RunOursAlternating(const std::vector<TrainConfig>& configs,
                                       const models::TrainGraph& tg, const RunOptions& o,
                                       int rounds);

// Runs the peer script of `c` (its steps and warmup) under o.peer_coretype; after its timeout
// (o.peer_timeout) its ranks are killed, then the script; a failed run is tried once more.
PeerRun RunPeer(const TrainConfig& c, const RunOptions& o);

// The core an OpenBLAS line of a worker log names: CoreOfBlasLine("... core=SkylakeX ...")
// is "SkylakeX"; "?" when absent.
std::string CoreOfBlasLine(const std::string& line);

// The top symbols by self time of a perf.data file, through `perf report`.
std::string PerfTop(const std::string& data, int lines);

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_TRAIN_RUNS_H_
