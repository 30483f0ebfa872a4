// Training steps of //models on a local cluster of real processes (coordinator + worker daemons),
// side by side with the PyTorch peers (../shared/peers/mlp_bench.py, transformer_bench.py):
//   - MLP regression (batch 256, d_model 1024, d_ff 4096, biases, SGD lr 1e-3, fp32) on 2 workers:
//     data parallel (mesh x:2, batch:x) vs torch DDP, model parallel (x:2, d_ff:x) vs torch mp;
//     like the peer's mp mode (and unlike its DDP mode), our mp graph also computes and allreduces
//     the input gradient dX (MlpOptions::input_gradient, kept in the variable "x/grad");
//     each of our steps is one request (Session::RunSteps(1, {}, {loss})), timed at the client;
//     also the same steps run in one request (RunSteps(steps)), per step = total / steps, which
//     shows what the per-request path (client -> coordinator -> workers) costs.
//   - the Transformer LM at models::BenchConfig() (batch 32 x 128 tokens, synthetic ids, SGD lr
//   0.1)
//     under dp (x:2, batch:x), mp (x:2, heads:x,d_ff:x,vocab:x) and dpmp (rows:2,cols:2 on 4
//     workers) vs transformer_bench.py --mode dp / mp / dpmp; tokens/s = batch*length / step time.
// Interleaved: for each configuration, ours (a fresh cluster, stopped afterwards) then the peer,
// and the whole sequence `--reps` times. Reported: the median over reps of each run's median step
// time. Peers run as `OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 <peer> ...` (OpenBLAS 0.3.21
// falls back to its slow Prescott kernel on Intel family 6 model 207 otherwise,
// ../shared/PLATFORM.md; --peer_coretype picks another core, e.g. ours for a same-kernel
// comparison); our workers choose their kernel themselves (kernels/blas.h) and the table header
// shows the one their logs name.
//
//   bazel run -c opt //bench:train_bench [-- --reps 2 --steps 30 --warmup 5 --only mlp|transformer
//                                           --skip_peers --perf_dir /tmp/prof]
//
// --perf_dir: after the tables, runs each of our configurations once more with `perf record`
// attached to every worker during the timed steps, and prints the top symbols
// (self time) per process kind; the perf.data files stay in the directory for `perf report -i`.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "models/train.h"
#include "util/flags.h"

namespace meshrt {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Config {
  std::string model;  // mlp | transformer
  std::string name;   // dp, mp, dpmp
  std::string mesh;
  std::string layout;
  int workers;
  std::string peer_args;  // appended to the peer script's command line
  std::string peer_name;  // how the table names the peer
  double goal;            // mlp: ours/peer step time <= goal; transformer: tokens/s ratio >= goal
};

struct Flags {
  int64_t reps = 2;
  int64_t steps = 30;
  int64_t warmup = 5;
  std::string only;
  bool skip_peers = false;
  std::string peers_dir = "/work/shared/peers";
  std::string perf_dir;
  bool explain = false;
  std::string peer_coretype = "SkylakeX";
  bool overlap_comm = true;  // the workers' --overlap_comm
};

// One run of ours: per-step times (RunSteps(1) each) and the per-step time of the
// same number of steps in one request.
struct OursRun {
  double median_ms = -1;
  double batched_ms = -1;  // RunSteps(steps) total / steps; -1 when not measured
  float loss = 0;
  std::string blas;  // the worker log's OpenBLAS line
};

struct PeerRun {
  double median_ms = -1;
  double comm_ms = -1;
  std::string core;   // OpenBLAS core the peer reports
  std::string error;  // non-empty: the run failed
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The "... OpenBLAS kernel (...)" line of a worker log in `log_dir`.
std::string BlasLine(const std::string& log_dir, int workers) {
  for (int i = 0; i < workers; ++i) {
    for (const std::string& name :
         {absl::StrCat("worker_", i), absl::StrCat("worker", i), absl::StrCat("worker-", i)}) {
      std::string text = ReadFile(absl::StrCat(log_dir, "/", name, ".log"));
      size_t p = text.find("meshrt-worker: ");
      if (p == std::string::npos) continue;
      size_t e = text.find('\n', p);
      return text.substr(p + 15, e == std::string::npos ? std::string::npos : e - p - 15);
    }
  }
  return "?";
}

absl::StatusOr<models::TrainGraph> BuildGraph(const std::string& model, const std::string& mode) {
  TrainOptions train;
  train.optimizer = "sgd";
  if (model == "mlp") {
    models::MlpOptions m;  // batch 256, d_model 1024, d_ff 4096
    m.biases = true;       // as the peer's b1, b2
    m.fixed_data = true;   // one batch drawn once, as the peer's
    // The peer's mp mode computes (and allreduces) the input gradient dX as a layer inside a
    // deeper network would; its DDP mode does not. Ours does the same work in each mode.
    m.input_gradient = mode == "mp";
    train.learning_rate.base = 1e-3f;
    return models::BuildMlpTrainGraph(m, train);
  }
  train.learning_rate.base = 0.1f;
  return models::BuildTransformerTrainGraph(models::BenchConfig(), train);
}

[[noreturn]] void Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "train_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

// Starts `perf record` on `pids`; returns its pid.
pid_t StartPerf(const std::vector<pid_t>& pids, const std::string& out) {
  std::vector<std::string> pid_text;
  for (pid_t p : pids) pid_text.push_back(absl::StrCat(p));
  // DWARF unwinding: the binaries have no frame pointers; callers (e.g. of Tensor's zero fill)
  // are then visible with `perf report -i FILE --no-children -G`.
  std::vector<std::string> argv = {"perf",
                                   "record",
                                   "-q",
                                   "-F",
                                   "250",
                                   "--call-graph",
                                   "dwarf,16384",
                                   "-o",
                                   out,
                                   "-p",
                                   absl::StrJoin(pid_text, ",")};
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp("perf", args.data());
    _exit(127);
  }
  absl::SleepFor(absl::Milliseconds(500));  // let it attach
  return pid;
}

void StopPerf(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
}

// Runs one configuration of ours on a fresh local cluster. With `perf_out`, perf records the
// coordinator and the workers during the timed steps.
OursRun RunOurs(const Config& c, const models::TrainGraph& tg, const Flags& f,
                const std::string& perf_out = "") {
  char pattern[] = "/tmp/train_bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) Fail("mkdtemp", absl::InternalError("cannot make a log dir"));
  LocalClusterOptions options;
  options.workers = c.workers;
  options.coordinator_command = {"client/meshrt", "coordinator"};
  options.worker_command = {"client/meshrt", "worker"};
  options.log_dir = pattern;
  if (!f.overlap_comm) options.worker_flags.push_back("--overlap_comm=false");
  auto cluster = LocalCluster::Start(options);
  if (!cluster.ok()) Fail("starting the local cluster", cluster.status());
  ClientOptions co = (*cluster)->client_options();
  auto client = Client::Connect(co);
  if (!client.ok()) Fail("connecting", client.status());
  Mesh mesh = Mesh::Parse(c.mesh).value();
  auto rules = LayoutRules::Parse(c.layout, mesh);
  if (!rules.ok()) Fail("layout " + c.layout, rules.status());
  auto session = (*client)->CreateSession(tg.graph.proto(), mesh, *rules);
  if (!session.ok()) Fail(absl::StrCat(c.model, " ", c.name, ": session"), session.status());
  if (f.explain)
    std::printf("%s %s layout report:\n%s\n", c.model.c_str(), c.name.c_str(),
                (*session)->explain().c_str());

  OursRun run;
  run.blas = BlasLine(pattern, c.workers);
  auto step = [&](int64_t n) {
    absl::StatusOr<TensorMap> out = (*session)->RunSteps(n, {}, {tg.loss});
    if (!out.ok()) Fail(absl::StrCat(c.model, " ", c.name, ": step"), out.status());
    run.loss = out->at(tg.loss).f32()[0];
  };
  for (int64_t i = 0; i < f.warmup; ++i) step(1);
  pid_t perf = -1;
  if (!perf_out.empty()) {
    std::vector<pid_t> pids;
    for (int i = 0; i < (*cluster)->num_workers(); ++i) pids.push_back((*cluster)->worker_pid(i));
    perf = StartPerf(pids, perf_out);
  }
  std::vector<double> ms;
  for (int64_t i = 0; i < f.steps; ++i) {
    const absl::Time t0 = absl::Now();
    step(1);
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
  StopPerf(perf);
  run.median_ms = Median(ms);
  if (perf_out.empty()) {
    const absl::Time t0 = absl::Now();
    step(f.steps);
    run.batched_ms = absl::ToDoubleMilliseconds(absl::Now() - t0) / f.steps;
  }
  absl::Status closed = (*session)->Close();
  if (!closed.ok()) Fail("closing the session", closed);
  return run;
}

// "key=VALUE" in `line` as a double, or -1.
double Field(const std::string& line, const std::string& key) {
  size_t p = line.find(key);
  if (p == std::string::npos) return -1;
  p += key.size();
  size_t e = p;
  while (e < line.size() && (isdigit(line[e]) || line[e] == '.')) ++e;
  double v;
  return absl::SimpleAtod(line.substr(p, e - p), &v) ? v : -1;
}

PeerRun RunPeer(const Config& c, const Flags& f) {
  const std::string script = absl::StrCat(f.peers_dir, "/", c.model, "_bench.py");
  const std::string cmd =
      absl::StrCat("OPENBLAS_CORETYPE=", f.peer_coretype, " ", kPython, " ", script, " ", c.peer_args,
                   " --steps ", f.steps, " --warmup ", f.warmup, " 2>&1");
  std::fprintf(stderr, "  peer: %s\n", cmd.c_str());
  PeerRun run;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    run.error = "popen failed";
    return run;
  }
  std::string all;
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe) != nullptr) {
    std::string line = buf;
    all += line;
    if (line.rfind("step ms:", 0) == 0) {
      run.median_ms = Field(line, "median=");
      run.comm_ms = Field(line, "comm ms median=");
    }
    size_t p = line.find("OpenBLAS core=");
    if (p != std::string::npos) {
      run.core = line.substr(p + 14);
      while (!run.core.empty() && isspace(run.core.back())) run.core.pop_back();
    }
  }
  const int status = pclose(pipe);
  if (status != 0 || run.median_ms < 0) {
    run.error = absl::StrCat("exit status ", status, "; output:\n", all);
  }
  return run;
}

std::string Ms(double v) { return v < 0 ? "n/a" : absl::StrFormat("%.1f", v); }
std::string Ratio(double a, double b) {
  return a < 0 || b <= 0 ? "n/a" : absl::StrFormat("%.2f", a / b);
}
std::string Range(const std::vector<double>& v) {
  if (v.size() < 2) return "";
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return absl::StrFormat(" (%.1f–%.1f)", *lo, *hi);
}

// The top symbols by self time of a perf.data file, through `perf report`.
std::string PerfTop(const std::string& data, int lines) {
  const std::string cmd = absl::StrCat(
      "perf report -i ", data,
      " --no-children --sort symbol --stdio -q --percent-limit 0.7 -g none 2>/dev/null | "
      "sed -e 's/[ -]*$//' | grep -v '^$' | head -n ",
      lines);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  pclose(pipe);
  return out;
}

int Main(int argc, char** argv) {
  Flags f;
  FlagSet flags(
      "train_bench [--reps N] [--steps N] [--warmup N] [--only mlp|transformer] "
      "[--skip_peers] [--perf_dir DIR] [--explain] [--peer_coretype CORE]",
      "Training steps of the MLP and the Transformer LM on a local cluster vs the "
      "PyTorch peers, interleaved.");
  flags.Int("reps", &f.reps, "runs of every configuration (ours then the peer), default 2");
  flags.Int("steps", &f.steps, "timed steps per run (also passed to the peers)");
  flags.Int("warmup", &f.warmup, "warmup steps per run (also passed to the peers)");
  flags.String("only", &f.only, "mlp or transformer (default: both)");
  flags.Bool("skip_peers", &f.skip_peers, "run ours only");
  flags.String("peers_dir", &f.peers_dir, "where mlp_bench.py and transformer_bench.py are");
  flags.String("perf_dir", &f.perf_dir,
               "profile ours with perf record (one more run per configuration) into DIR");
  flags.Bool("explain", &f.explain, "print each session's layout report");
  flags.Bool("overlap_comm", &f.overlap_comm,
             "our workers' --overlap_comm (false: collectives block the step thread)");
  flags.String("peer_coretype", &f.peer_coretype,
               "OPENBLAS_CORETYPE for the peers (default SkylakeX, as ../shared/PLATFORM.md "
               "prescribes; set it to our workers' core for a same-kernel comparison)");
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok() || flags.help()) {
    if (!parsed.ok()) std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
    std::printf("%s", flags.Help().c_str());
    return parsed.ok() ? 0 : 2;
  }
  if (!f.only.empty() && f.only != "mlp" && f.only != "transformer") {
    std::fprintf(stderr, "--only takes mlp or transformer\n");
    return 2;
  }
  if (f.reps < 1 || f.steps < 1 || f.warmup < 0) {
    std::fprintf(stderr, "--reps and --steps need >= 1, --warmup >= 0\n");
    return 2;
  }

  std::string peers_skipped;
  if (f.skip_peers) {
    peers_skipped = "--skip_peers";
  } else if (std::system(absl::StrCat(kPython, " -c 'import torch' >/dev/null 2>&1").c_str()) !=
             0) {
    peers_skipped = absl::StrCat(kPython,
                                 " cannot import torch (install python3-torch: "
                                 "tools/setup_bench.sh)");
  } else if (access(absl::StrCat(f.peers_dir, "/mlp_bench.py").c_str(), R_OK) != 0) {
    peers_skipped = absl::StrCat("no peer scripts in ", f.peers_dir);
  }
  const bool peers = peers_skipped.empty();
  if (!peers)
    std::printf("NOTE: the PyTorch peers are SKIPPED (%s); peer columns say n/a\n\n",
                peers_skipped.c_str());

  std::vector<Config> configs;
  if (f.only.empty() || f.only == "mlp") {
    configs.push_back({"mlp", "dp", "x:2", "batch:x", 2, "--mode ddp --world 2", "torch DDP", 0.8});
    configs.push_back({"mlp", "mp", "x:2", "d_ff:x", 2, "--mode mp --world 2", "torch mp", 0.9});
  }
  if (f.only.empty() || f.only == "transformer") {
    configs.push_back(
        {"transformer", "dp", "x:2", "batch:x", 2, "--mode dp --world 2", "torch dp", 1.0});
    configs.push_back({"transformer", "mp", "x:2", "heads:x,d_ff:x,vocab:x", 2,
                       "--mode mp --world 2", "torch mp", 1.0});
    configs.push_back({"transformer", "dpmp", "rows:2,cols:2",
                       "batch:rows,heads:cols,d_ff:cols,vocab:cols", 4, "--mode dpmp --dp 2 --mp 2",
                       "torch dpmp", 1.0});
  }
  std::map<std::string, models::TrainGraph> graphs;
  // Keyed by model and mode: the MLP's mp graph also computes the input gradient.
  auto graph_key = [](const Config& c) { return c.model + "/" + c.name; };
  for (const Config& c : configs) {
    auto tg = BuildGraph(c.model, c.name);
    if (!tg.ok()) Fail("building the " + c.model, tg.status());
    graphs.emplace(graph_key(c), *std::move(tg));
  }

  const size_t n = configs.size();
  std::vector<std::vector<double>> ours(n), batched(n), peer(n), comm(n);
  std::vector<float> loss(n);
  std::vector<std::string> peer_err(n);
  std::string blas = "?", peer_core = "?";
  const absl::Time start = absl::Now();
  for (int64_t r = 0; r < f.reps; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const Config& c = configs[i];
      std::fprintf(stderr, "rep %lld/%lld: %s %s (ours, %d workers, mesh %s, layout %s)\n",
                   static_cast<long long>(r + 1), static_cast<long long>(f.reps), c.model.c_str(),
                   c.name.c_str(), c.workers, c.mesh.c_str(), c.layout.c_str());
      OursRun o = RunOurs(c, graphs.at(graph_key(c)), f);
      ours[i].push_back(o.median_ms);
      if (o.batched_ms >= 0) batched[i].push_back(o.batched_ms);
      loss[i] = o.loss;
      blas = o.blas;
      std::fprintf(stderr, "  ours: median %.1f ms/step%s, loss %.4f\n", o.median_ms,
                   o.batched_ms >= 0
                       ? absl::StrFormat(", %.1f ms/step in one request", o.batched_ms).c_str()
                       : "",
                   o.loss);
      if (!peers) continue;
      PeerRun p = RunPeer(c, f);
      if (!p.error.empty()) {
        std::fprintf(stderr, "  peer FAILED: %s\n", p.error.c_str());
        peer_err[i] = "failed";
        continue;
      }
      peer[i].push_back(p.median_ms);
      if (p.comm_ms >= 0) comm[i].push_back(p.comm_ms);
      peer_core = p.core;
      std::fprintf(stderr, "  peer: median %.1f ms/step\n", p.median_ms);
    }
  }
  const double minutes = absl::ToDoubleMinutes(absl::Now() - start);

  std::printf("## Training steps: meshrt (local cluster, worker processes) vs PyTorch peers\n\n");
  std::printf(
      "%lld reps x (%lld warmup + %lld timed steps), ours then the peer per "
      "configuration; medians over reps of each run's median (range over reps in "
      "parentheses). %.1f min.\n",
      static_cast<long long>(f.reps), static_cast<long long>(f.warmup),
      static_cast<long long>(f.steps), minutes);
  std::printf(
      "ours: workers' BLAS: %s, --overlap_comm=%s. peers: OPENBLAS_CORETYPE=%s, OpenBLAS core "
      "%s, 1 thread/rank.\n\n",
      blas.c_str(), f.overlap_comm ? "true" : "false", f.peer_coretype.c_str(),
      peers ? peer_core.c_str() : "n/a (skipped)");

  bool any_mlp = false, any_tr = false;
  for (const Config& c : configs) (c.model == "mlp" ? any_mlp : any_tr) = true;
  if (any_mlp) {
    std::printf(
        "### MLP (batch 256, d_model 1024, d_ff 4096, biases, SGD lr 1e-3, fp32), 2 "
        "workers\n\n");
    std::printf(
        "| mode | layout | ours ms/step (1 step/request) | ours ms/step (%lld steps in 1 "
        "request) | peer | peer ms/step | peer comm ms | ours/peer | goal |\n",
        static_cast<long long>(f.steps));
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; ++i) {
      const Config& c = configs[i];
      if (c.model != "mlp") continue;
      const double o = Median(ours[i]), p = peer[i].empty() ? -1 : Median(peer[i]);
      const std::string ratio = Ratio(o, p);
      std::string verdict = "n/a";
      if (p > 0) verdict = o / p <= c.goal ? "met" : "MISSED";
      std::printf("| %s | %s | %s%s | %s%s | %s | %s%s | %s | %s | <= %.1f (%s) |\n",
                  c.name.c_str(), c.layout.c_str(), Ms(o).c_str(), Range(ours[i]).c_str(),
                  Ms(Median(batched[i])).c_str(), Range(batched[i]).c_str(),
                  (c.peer_name + (peer_err[i].empty() ? "" : " (failed)")).c_str(), Ms(p).c_str(),
                  Range(peer[i]).c_str(), Ms(comm[i].empty() ? -1 : Median(comm[i])).c_str(),
                  ratio.c_str(), c.goal, verdict.c_str());
    }
    std::printf("\n");
  }
  if (any_tr) {
    const models::TransformerOptions t = models::BenchConfig();
    const double tokens = static_cast<double>(t.batch * t.length);
    std::printf(
        "### Transformer LM (batch %lld x length %lld, d_model %lld, %lld heads x %lld, "
        "d_ff %lld, %lld layers, vocab %lld, SGD lr 0.1, synthetic ids)\n\n",
        (long long)t.batch, (long long)t.length, (long long)t.d_model, (long long)t.heads,
        (long long)t.d_kv, (long long)t.d_ff, (long long)t.layers, (long long)t.vocab);
    std::printf(
        "| mode | workers | layout | ours ms/step | ours tokens/s | ours tokens/s (%lld "
        "steps in 1 request) | peer | peer ms/step | peer tokens/s | peer comm ms | "
        "ours/peer tokens/s | goal |\n",
        (long long)f.steps);
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; ++i) {
      const Config& c = configs[i];
      if (c.model != "transformer") continue;
      const double o = Median(ours[i]), p = peer[i].empty() ? -1 : Median(peer[i]);
      const double ot = tokens / (o / 1e3), pt = p > 0 ? tokens / (p / 1e3) : -1;
      std::string verdict = "n/a";
      if (pt > 0) verdict = ot / pt >= c.goal ? "met" : "MISSED";
      const double ob = batched[i].empty() ? -1 : Median(batched[i]);
      std::printf("| %s | %d | %s | %s%s | %.0f | %s | %s | %s%s | %s | %s | %s | >= %.1f (%s) |\n",
                  c.name.c_str(), c.workers, c.layout.c_str(), Ms(o).c_str(),
                  Range(ours[i]).c_str(), ot,
                  ob > 0 ? absl::StrFormat("%.0f", tokens / (ob / 1e3)).c_str() : "n/a",
                  (c.peer_name + (peer_err[i].empty() ? "" : " (failed)")).c_str(), Ms(p).c_str(),
                  Range(peer[i]).c_str(), pt > 0 ? absl::StrFormat("%.0f", pt).c_str() : "n/a",
                  Ms(comm[i].empty() ? -1 : Median(comm[i])).c_str(), Ratio(ot, pt).c_str(), c.goal,
                  verdict.c_str());
    }
    std::printf("\n");
  }
  std::printf("final losses (ours, last run):");
  for (size_t i = 0; i < n; ++i) {
    std::printf(" %s/%s %.4f", configs[i].model.c_str(), configs[i].name.c_str(), loss[i]);
  }
  std::printf("\n");
  if (!peers) std::printf("\nNOTE: peers SKIPPED (%s)\n", peers_skipped.c_str());

  if (!f.perf_dir.empty()) {
    mkdir(f.perf_dir.c_str(), 0755);
    std::printf(
        "\n## Profiles of ours (perf record -F 250 --call-graph dwarf on every worker during %lld "
        "timed "
        "steps; self time by symbol)\n",
        static_cast<long long>(f.steps));
    for (const Config& c : configs) {
      const std::string data = absl::StrCat(f.perf_dir, "/", c.model, "_", c.name, ".data");
      OursRun o = RunOurs(c, graphs.at(graph_key(c)), f, data);
      std::printf("\n### %s %s (%s), %.1f ms/step under perf — %s\n\n```\n%s```\n", c.model.c_str(),
                  c.name.c_str(), c.layout.c_str(), o.median_ms, data.c_str(),
                  PerfTop(data, 40).c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::Main(argc, argv); }
