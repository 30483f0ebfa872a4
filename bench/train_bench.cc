// Training steps of //models on a local cluster of real processes (coordinator + worker daemons),
// side by side with the PyTorch peers (../shared/peers/mlp_bench.py, transformer_bench.py):
//   - MLP regression (batch 256, d_model 1024, d_ff 4096, biases, SGD lr 1e-3, fp32) on 2 workers:
//     data parallel (mesh x:2, batch:x) vs torch DDP, model parallel (x:2, d_ff:x) vs torch mp;
//     like the peer's mp mode (and unlike its DDP mode), our mp graph also computes and allreduces
//     the input gradient dX (MlpOptions::input_gradient, kept in the variable "x/grad").
//   - the Transformer LM at two sizes: "small" = models::BenchConfig() (the peer's default, batch
//     32 x 128 tokens) and "model" = models::ModelScaleBenchConfig() (d_model 512, 8 heads x 64,
//     d_ff 2048, 4 layers, batch 8 x 256), SGD lr 0.1, synthetic ids, under dp (x:2, batch:x),
//     mp (x:2, heads:x,d_ff:x,vocab:x) and dpmp (rows:2,cols:2 on 4 workers) vs
//     transformer_bench.py --mode dp / mp / dpmp with the same sizes; tokens/s = tokens / step time.
// Each of our steps is one request (Session::RunSteps(1)), timed at the client; also the same steps
// in one request (RunSteps(steps)), which shows what the per-request path costs.
//
// Equal footing (issue 14 item 5): OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE and MESHRT_BLAS_CORETYPE
// are removed from this process's environment (so from the workers' and the peers') and reported;
// our workers choose their core by measurement (kernels/blas_probe.h) and the peer gets its own
// fastest correct core found the same way (bench/peer_cores.h); by default both are measured
// afresh at the start (a new cache directory, MESHRT_BLAS_CACHE_DIR, which the workers read).
// The header names both cores with their single-thread 1024^3 GFLOP/s, which is the peak the
// GFLOP/s columns are divided by (model FLOPs per step, bench/train_flops.h, per worker).
// Interleaved: per configuration ours (a fresh cluster) then the peer, the whole sequence `--reps`
// times; reported: the median over reps of each run's median step time. Goals (issue 14 item 6)
// are printed as met / MISSED, never asserted.
//
//   bazel run -c opt //bench:train_bench [-- --reps 2 --steps 30 --warmup 5 --only mlp|transformer
//       --sizes small,model --skip_peers --perf_dir /tmp/prof --peer_coretype C --our_coretype C
//       --remeasure_cores=false --model_steps 10 --model_warmup 2 --peer_timeout S]
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "bench/gemm_floor.h"
#include "bench/peer_cores.h"
#include "bench/train_flops.h"
#include "bench/train_runs.h"
#include "bench/train_tables.h"
#include "kernels/blas.h"
#include "kernels/blas_probe.h"
#include "models/train.h"
#include "util/flags.h"

namespace meshrt {
namespace bench {
namespace {

constexpr char kOurLibrary[] = "libopenblas.so.0";  // kernels::BlasOptions' first library

[[noreturn]] void Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "train_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

absl::StatusOr<models::TrainGraph> BuildGraph(const TrainConfig& c) {
  TrainOptions train;
  train.optimizer = "sgd";
  if (c.model == "mlp") {
    models::MlpOptions m;  // batch 256, d_model 1024, d_ff 4096
    m.biases = true;       // as the peer's b1, b2
    m.fixed_data = true;   // one batch drawn once, as the peer's
    // The peer's mp mode computes (and allreduces) the input gradient dX as a layer inside a
    // deeper network would; its DDP mode does not. Ours does the same work in each mode.
    m.input_gradient = c.name == "mp";
    train.learning_rate.base = 1e-3f;
    return models::BuildMlpTrainGraph(m, train);
  }
  train.learning_rate.base = 0.1f;
  return models::BuildTransformerTrainGraph(TransformerOf(c.size), train);
}

// The transformer_bench.py flags of `t`'s sizes.
std::string PeerSizeArgs(const models::TransformerOptions& t) {
  return absl::StrFormat("--batch %d --seq-len %d --d-model %d --heads %d --d-kv %d --d-ff %d "
                         "--layers %d",
                         t.batch, t.length, t.d_model, t.heads, t.d_kv, t.d_ff, t.layers);
}

std::vector<TrainConfig> Configs(bool mlp, bool transformer, const std::vector<std::string>& sizes) {
  std::vector<TrainConfig> configs;
  if (mlp) {
    models::MlpOptions m;
    TrainConfig dp{"mlp", "", "dp", "x:2", "batch:x", 2, "--mode ddp --world 2", "torch DDP", 0.6};
    TrainConfig mp{"mlp", "", "mp", "x:2", "d_ff:x", 2, "--mode mp --world 2", "torch mp", 0.75};
    dp.flops = MlpStepFlops(m);  // DDP computes no input gradient, nor does our dp graph
    m.input_gradient = true;
    mp.flops = MlpStepFlops(m);
    configs.push_back(dp);
    configs.push_back(mp);
  }
  if (!transformer) return configs;
  for (const std::string& size : sizes) {
    const models::TransformerOptions t = TransformerOf(size);
    const std::string args = PeerSizeArgs(t);
    std::vector<TrainConfig> modes = {
        {"transformer", size, "dp", "x:2", "batch:x", 2, "--mode dp --world 2 " + args, "torch dp",
         1.15},
        {"transformer", size, "mp", "x:2", "heads:x,d_ff:x,vocab:x", 2,
         "--mode mp --world 2 " + args, "torch mp", 1.3},
        {"transformer", size, "dpmp", "rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols",
         4, "--mode dpmp --dp 2 --mp 2 " + args, "torch dpmp", 1.3}};
    for (TrainConfig& c : modes) {
      c.flops = TransformerStepFlops(t);
      c.tokens = static_cast<double>(t.batch * t.length);
      configs.push_back(c);
    }
  }
  return configs;
}

// Removes the core presets from the environment (the workers and the peers inherit it): what
// was set, as "VAR=value" entries.
std::vector<std::string> UnsetCorePresets() {
  std::vector<std::string> unset;
  for (const char* var : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MESHRT_BLAS_CORETYPE"}) {
    const char* value = std::getenv(var);
    if (value == nullptr) continue;
    unset.push_back(absl::StrCat(var, "=", value));
    unsetenv(var);
  }
  return unset;
}

std::string BlasCacheDir() {
  const char* dir = std::getenv("MESHRT_BLAS_CACHE_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  return absl::StrCat("/tmp/meshrt-blas-", getuid());
}

// The measurement of `core` in `measured`, or nullptr.
const kernels::CoreMeasurement* Find(const std::vector<kernels::CoreMeasurement>& measured,
                                     const std::string& core) {
  for (const kernels::CoreMeasurement& m : measured) {
    if (m.requested == core && m.error.empty()) return &m;
  }
  return nullptr;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> unset_here = UnsetCorePresets();
  const char* unset_by_make = std::getenv("MESHRT_BENCH_UNSET");
  TablesInput in;
  in.load_start = LoadAverage();
  RunOptions o;
  int64_t reps = 2, steps = 30, warmup = 5, model_steps = 10, model_warmup = 2;
  std::string only, sizes_flag = "small,model", perf_dir, our_core_flag, peer_core_flag;
  std::string peer_probe = "bench/peer_core_probe.py";
  bool skip_peers = false, remeasure = true;
  o.peers_dir = bench::DefaultPeersDir();
  o.python = "/usr/bin/python3";
  FlagSet flags(
      "train_bench [--reps N] [--steps N] [--warmup N] [--only mlp|transformer] "
      "[--sizes small,model] [--skip_peers] [--perf_dir DIR] [--explain] [--overlap_comm=auto|true|false] [--peer_coretype CORE] "
      "[--our_coretype CORE] [--remeasure_cores=false]",
      "Training steps of the MLP and the Transformer LM (two sizes) on a local cluster vs the "
      "PyTorch peers, interleaved, each side on its fastest correct OpenBLAS core.");
  flags.Int("reps", &reps, "runs of every configuration (ours then the peer), default 2");
  flags.Int("steps", &steps, "timed steps per run (also passed to the peers), default 30");
  flags.Int("warmup", &warmup, "warmup steps per run (also passed to the peers), default 5");
  flags.Int("model_steps", &model_steps,
            "timed steps per run of the model-scale Transformer, default 10 (~1 s each)");
  flags.Int("model_warmup", &model_warmup,
            "warmup steps per run of the model-scale Transformer, default 2");
  flags.Int("peer_timeout", &o.peer_timeout,
            "seconds before a peer run (and its ranks) is killed; default 0: 120 + steps "
            "times a per-step allowance (mlp 2, small 4, model 15 s)");
  flags.String("only", &only, "mlp or transformer (default: both)");
  flags.String("sizes", &sizes_flag, "Transformer sizes: small (BenchConfig), model "
                                     "(ModelScaleBenchConfig) or both (default small,model)");
  flags.Bool("skip_peers", &skip_peers, "run ours only");
  flags.String("peers_dir", &o.peers_dir, "where mlp_bench.py and transformer_bench.py are (default: $MESHRT_PEERS_DIR, else "
               "shared/peers beside the checkout)");
  flags.String("peer_probe", &peer_probe, "the peer's core probe (bench/peer_core_probe.py)");
  flags.String("perf_dir", &perf_dir,
               "profile ours with perf record (one more run per configuration) into DIR");
  flags.Bool("explain", &o.explain, "print each session's layout report");
  flags.String("overlap_comm", &o.overlap_comm,
               "our workers' --overlap_comm: auto (measured on each session's first steps), true "
               "or false (collectives block the step thread)");
  flags.String("peer_coretype", &peer_core_flag,
               "OPENBLAS_CORETYPE for the peers instead of their fastest correct core");
  flags.String("our_coretype", &our_core_flag,
               "MESHRT_BLAS_CORETYPE for our workers instead of their fastest correct core");
  flags.Bool("remeasure_cores", &remeasure,
             "measure both sides' cores afresh now, into a new cache directory the workers "
             "read (default true); false: the machine's caches (blas_probe's directory)");
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok() || flags.help()) {
    if (!parsed.ok()) std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
    std::printf("%s", flags.Help().c_str());
    return parsed.ok() ? 0 : 2;
  }
  in.environment = absl::StrCat(
      "core presets unset for this benchmark: by make bench: ",
      unset_by_make == nullptr ? "(not run by make bench)"
                               : (*unset_by_make == '\0' ? "none were set" : unset_by_make),
      "; by train_bench itself: ", unset_here.empty() ? "none were set" : absl::StrJoin(unset_here, " "),
      "; our workers' --overlap_comm=", o.overlap_comm);
  if (!only.empty() && only != "mlp" && only != "transformer") {
    std::fprintf(stderr, "--only takes mlp or transformer, not '%s'\n", only.c_str());
    return 2;
  }
  const std::vector<std::string> sizes = absl::StrSplit(sizes_flag, ',', absl::SkipEmpty());
  for (const std::string& s : sizes) {
    if (s != "small" && s != "model") {
      std::fprintf(stderr, "--sizes takes small and/or model (comma-separated), not '%s'\n",
                   s.c_str());
      return 2;
    }
  }
  if (reps < 1 || steps < 1 || warmup < 0 || model_steps < 1 || model_warmup < 0 ||
      o.peer_timeout < 0) {
    std::fprintf(stderr,
                 "--reps, --steps and --model_steps need >= 1, --warmup, --model_warmup and "
                 "--peer_timeout >= 0\n");
    return 2;
  }

  std::string peers_skipped;
  if (skip_peers) {
    peers_skipped = "--skip_peers";
  } else if (std::system(absl::StrCat(o.python, " -c 'import torch' >/dev/null 2>&1").c_str()) !=
             0) {
    peers_skipped = absl::StrCat(o.python,
                                 " cannot import torch (install python3-torch: "
                                 "tools/setup_bench.sh)");
  } else if (access(absl::StrCat(o.peers_dir, "/mlp_bench.py").c_str(), R_OK) != 0) {
    peers_skipped = absl::StrCat("no peer scripts in ", o.peers_dir);
  }
  in.peers = peers_skipped.empty();
  in.peers_skipped = peers_skipped;
  if (!in.peers) {
    std::printf("NOTE: the PyTorch peers are SKIPPED (%s); peer columns say n/a\n\n",
                peers_skipped.c_str());
  }

  // Cores: ours as the workers will choose (the cache they read), the peer's the same way.
  if (remeasure) {
    char dir[] = "/tmp/train_bench-cores-XXXXXX";
    if (mkdtemp(dir) == nullptr) Fail("mkdtemp", absl::InternalError("cannot make a cache dir"));
    setenv("MESHRT_BLAS_CACHE_DIR", dir, 1);
  }
  const std::string cache_dir = BlasCacheDir();
  mkdir(cache_dir.c_str(), 0700);
  const kernels::CpuFeatures cpu = kernels::CpuFeatures::Detect();
  const std::vector<std::string> candidates = kernels::CandidateCores(cpu);
  std::fprintf(stderr, "measuring our cores (%s) ...\n", absl::StrJoin(candidates, ", ").c_str());
  absl::StatusOr<kernels::MeasuredCores> ours_measured =
      kernels::MeasuredCoresFor(kOurLibrary, cpu, /*measure=*/true);
  std::vector<kernels::CoreMeasurement> ours_cores;
  if (ours_measured.ok()) ours_cores = ours_measured->cores;
  in.our_cores = ours_measured.ok() ? kernels::DescribeMeasurements(ours_cores)
                                    : std::string(ours_measured.status().message());
  if (ours_measured.ok()) {
    absl::StrAppend(&in.our_cores, ours_measured->from_cache ? ", cached in " : ", measured now into ",
                    ours_measured->cache_file);
  }
  const kernels::CoreMeasurement* ours_best = kernels::FastestCorrect(ours_cores);
  in.our_core = !our_core_flag.empty() ? our_core_flag : (ours_best ? ours_best->requested : "");
  if (!our_core_flag.empty()) setenv("MESHRT_BLAS_CORETYPE", our_core_flag.c_str(), 1);
  if (const kernels::CoreMeasurement* m = Find(ours_cores, in.our_core)) in.our_peak = m->gflops;
  if (!in.our_core.empty() && in.our_peak <= 0) {
    std::vector<kernels::CoreMeasurement> one = kernels::MeasureCores(kOurLibrary, {in.our_core});
    if (!one.empty() && one[0].error.empty()) in.our_peak = one[0].gflops;
  }
  if (in.peers) {
    std::fprintf(stderr, "measuring the peer's cores ...\n");
    PeerCores pc = PeerCoresFor(o.python, peer_probe, candidates, cache_dir);
    in.peer_cores = absl::StrCat(kernels::DescribeMeasurements(pc.cores), " (torch.mm)",
                                 pc.from_cache ? ", cached in " : ", measured now into ",
                                 pc.cache_file.empty() ? "(nowhere)" : pc.cache_file);
    const kernels::CoreMeasurement* best = kernels::FastestCorrect(pc.cores);
    o.peer_coretype = !peer_core_flag.empty() ? peer_core_flag : (best ? best->requested : "");
    if (const kernels::CoreMeasurement* m = Find(pc.cores, o.peer_coretype)) {
      in.peer_peak = m->gflops;
    } else if (!o.peer_coretype.empty()) {
      kernels::CoreMeasurement m = MeasurePeerCore(o.python, peer_probe, o.peer_coretype);
      if (m.error.empty()) in.peer_peak = m.gflops;
    }
    in.peer_core = o.peer_coretype;
    in.peer_core_how = !peer_core_flag.empty() ? "--peer_coretype"
                       : best != nullptr       ? "fastest correct"
                                               : "none correct: OpenBLAS's own detection";
  }
  in.our_core_how = !our_core_flag.empty() ? "--our_coretype"
                    : ours_best != nullptr  ? "fastest correct"
                                            : "none correct: the workers' fallback";

  in.configs = Configs(only.empty() || only == "mlp", only.empty() || only == "transformer", sizes);
  for (TrainConfig& c : in.configs) {
    c.steps = c.size == "model" ? model_steps : steps;
    c.warmup = c.size == "model" ? model_warmup : warmup;
  }
  const size_t n = in.configs.size();
  std::map<std::string, models::TrainGraph> graphs;
  // Keyed by model, size and mode: the MLP's mp graph also computes the input gradient.
  auto key = [](const TrainConfig& c) { return absl::StrCat(c.model, "/", c.size, "/", c.name); };
  for (const TrainConfig& c : in.configs) {
    if (graphs.count(key(c))) continue;
    auto tg = BuildGraph(c);
    if (!tg.ok()) Fail("building the " + c.model, tg.status());
    graphs.emplace(key(c), *std::move(tg));
  }

  in.results.resize(n);
  const absl::Time start = absl::Now();
  for (int64_t r = 0; r < reps; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const TrainConfig& c = in.configs[i];
      Result& res = in.results[i];
      std::fprintf(stderr, "rep %lld/%lld: %s %s %s (ours, %d workers, mesh %s, layout %s)\n",
                   static_cast<long long>(r + 1), static_cast<long long>(reps), c.model.c_str(),
                   c.size.c_str(), c.name.c_str(), c.workers, c.mesh.c_str(), c.layout.c_str());
      absl::Time t0 = absl::Now();
      OursRun ours = RunOurs(c, graphs.at(key(c)), o);
      res.ours_seconds += absl::ToDoubleSeconds(absl::Now() - t0);
      res.ours.push_back(ours.median_ms);
      if (ours.batched_ms >= 0) res.batched.push_back(ours.batched_ms);
      res.loss = ours.loss;
      in.blas_line = ours.blas;
      std::fprintf(stderr, "  ours: median %.1f ms/step, %.1f ms/step in one request, loss %.4f\n",
                   ours.median_ms, ours.batched_ms, ours.loss);
      if (!in.peers) continue;
      t0 = absl::Now();
      PeerRun p = RunPeer(c, o);
      res.peer_seconds += absl::ToDoubleSeconds(absl::Now() - t0);
      if (!p.error.empty()) {
        std::fprintf(stderr, "  peer FAILED: %s\n", p.error.c_str());
        res.peer_failed = true;
        continue;
      }
      if (!p.note.empty()) {
        std::fprintf(stderr, "  peer: %s (its results were printed)\n", p.note.c_str());
        ++res.peer_killed;
      }
      res.peer.push_back(p.median_ms);
      if (p.comm_ms >= 0) res.comm.push_back(p.comm_ms);
      in.peer_reported_core = p.core;
      std::fprintf(stderr, "  peer: median %.1f ms/step\n", p.median_ms);
    }
  }
  in.reps = reps;
  in.minutes = absl::ToDoubleMinutes(absl::Now() - start);
  // The GEMM floors, here where nothing else runs, on the core our workers ran.
  if (!in.our_core.empty()) setenv("MESHRT_BLAS_CORETYPE", in.our_core.c_str(), 1);
  in.cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  for (size_t i = 0; i < n; ++i) {
    const TrainConfig& c = in.configs[i];
    const models::TrainGraph& tg = graphs.at(key(c));
    absl::StatusOr<GemmFloor> floor =
        MeasureGemmFloor(tg.graph, {tg.loss}, c.mesh, c.layout, /*reps=*/3);
    if (!floor.ok()) Fail("the GEMM floor of " + key(c), floor.status());
    in.results[i].gemm_floor_ms = 1e3 * floor->seconds;
    in.floor_core = floor->core;
    if (!in.our_core.empty() && floor->core != in.our_core) {
      in.floor_core += " (NOT our workers' " + in.our_core + ": OpenBLAS was loaded before)";
    }
    std::fprintf(stderr, "GEMM floor %s: %.1f ms/step per worker (%lld products, %lld shapes)\n",
                 key(c).c_str(), 1e3 * floor->seconds, static_cast<long long>(floor->products),
                 static_cast<long long>(floor->shapes));
  }
  PrintTables(in);

  if (!perf_dir.empty()) {
    mkdir(perf_dir.c_str(), 0755);
    std::printf(
        "\n## Profiles of ours (perf record -F 250 --call-graph dwarf on every worker during %lld "
        "timed steps; self time by symbol)\n",
        static_cast<long long>(steps));
    for (const TrainConfig& c : in.configs) {
      const std::string data =
          absl::StrCat(perf_dir, "/", c.model, c.size.empty() ? "" : "_", c.size, "_", c.name,
                       ".data");
      OursRun ours = RunOurs(c, graphs.at(key(c)), o, data);
      std::printf("\n### %s %s %s (%s), %.1f ms/step under perf — %s\n\n```\n%s```\n",
                  c.model.c_str(), c.size.c_str(), c.name.c_str(), c.layout.c_str(),
                  ours.median_ms, data.c_str(), PerfTop(data, 40).c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::bench::Main(argc, argv); }
