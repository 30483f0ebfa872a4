#include "bench/train_runs.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "util/median.h"

namespace meshrt {
namespace bench {
namespace {

[[noreturn]] void Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "train_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The "meshrt-worker: ... OpenBLAS ... core=..." line of a worker log in `log_dir`.
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

// Starts `perf record` on `pids`; returns its pid.
pid_t StartPerf(const std::vector<pid_t>& pids, const std::string& out) {
  std::vector<std::string> pid_text;
  for (pid_t p : pids) pid_text.push_back(absl::StrCat(p));
  // DWARF unwinding: the binaries have no frame pointers; callers (e.g. of Tensor's zero fill)
  // are then visible with `perf report -i FILE --no-children -G`.
  std::vector<std::string> argv = {"perf", "record", "-q", "-F", "250", "--call-graph",
                                   "dwarf,16384", "-o", out, "-p", absl::StrJoin(pid_text, ",")};
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

}  // namespace

double Median(std::vector<double> v) { return v.empty() ? -1 : meshrt::Median(std::move(v)); }

models::TransformerOptions TransformerOf(const std::string& size) {
  return size == "model" ? models::ModelScaleBenchConfig() : models::BenchConfig();
}

std::string CoreOfBlasLine(const std::string& line) {
  size_t p = line.find(" core=");
  if (p == std::string::npos) return "?";
  p += 6;
  size_t e = p;
  while (e < line.size() && !isspace(static_cast<unsigned char>(line[e]))) ++e;
  return e > p ? line.substr(p, e - p) : "?";
}

namespace {

// A local cluster of `workers` processes for ours (logs in a fresh /tmp dir, returned in
// `log_dir`), and a client of it.
std::pair<std::unique_ptr<LocalCluster>, std::unique_ptr<Client>> StartOurs(int workers,
                                                                            const RunOptions& o,
                                                                            std::string* log_dir) {
  char pattern[] = "/tmp/train_bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) Fail("mkdtemp", absl::InternalError("cannot make a log dir"));
  *log_dir = pattern;
  LocalClusterOptions options;
  options.workers = workers;
  options.coordinator_command = {"client/meshrt", "coordinator"};
  options.worker_command = {"client/meshrt", "worker"};
  options.log_dir = pattern;
  options.worker_flags.push_back("--overlap_comm=" + o.overlap_comm);
  auto cluster = LocalCluster::Start(options);
  if (!cluster.ok()) Fail("starting the local cluster", cluster.status());
  ClientOptions co = (*cluster)->client_options();
  auto client = Client::Connect(co);
  if (!client.ok()) Fail("connecting", client.status());
  return {*std::move(cluster), *std::move(client)};
}

// One session of `c` on `client`: its warmup, then c.steps timed steps of one request each (and,
// with o.batched and no perf, the same count in one request); closed after. `start_perf` (may be
// empty) is called once the warmup is done and returns what `stop_perf` gets.
OursRun TimeSession(Client& client, const TrainConfig& c, const models::TrainGraph& tg,
                    const RunOptions& o, const std::function<pid_t()>& start_perf) {
  Mesh mesh = Mesh::Parse(c.mesh).value();
  auto rules = LayoutRules::Parse(c.layout, mesh);
  if (!rules.ok()) Fail("layout " + c.layout, rules.status());
  const std::string what = absl::StrCat(c.model, " ", c.size, " ", c.name);
  auto session = client.CreateSession(tg.graph.proto(), mesh, *rules);
  if (!session.ok()) Fail(what + ": session", session.status());
  if (o.explain) {
    std::printf("%s layout report:\n%s\n", what.c_str(), (*session)->explain().c_str());
  }
  OursRun run;
  auto step = [&](int64_t n) {
    absl::StatusOr<TensorMap> out = (*session)->RunSteps(n, {}, {tg.loss});
    if (!out.ok()) Fail(what + ": step", out.status());
    run.loss = out->at(tg.loss).f32()[0];
  };
  for (int64_t i = 0; i < c.warmup; ++i) step(1);
  const pid_t perf = start_perf ? start_perf() : -1;
  std::vector<double> ms;
  for (int64_t i = 0; i < c.steps; ++i) {
    const absl::Time t0 = absl::Now();
    step(1);
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
  StopPerf(perf);
  run.median_ms = Median(ms);
  if (!start_perf && o.batched) {
    const absl::Time t0 = absl::Now();
    step(c.steps);
    run.batched_ms = absl::ToDoubleMilliseconds(absl::Now() - t0) / c.steps;
  }
  absl::Status closed = (*session)->Close();
  if (!closed.ok()) Fail("closing the session", closed);
  return run;
}

}  // namespace

OursRun RunOurs(const TrainConfig& c, const models::TrainGraph& tg, const RunOptions& o,
                const std::string& perf_out) {
  std::string log_dir;
  auto [cluster, client] = StartOurs(c.workers, o, &log_dir);
  std::function<pid_t()> start_perf;
  if (!perf_out.empty()) {
    start_perf = [&, cluster = cluster.get()] {
      std::vector<pid_t> pids;
      for (int i = 0; i < cluster->num_workers(); ++i) pids.push_back(cluster->worker_pid(i));
      return StartPerf(pids, perf_out);
    };
  }
  OursRun run = TimeSession(*client, c, tg, o, start_perf);
  run.blas = BlasLine(log_dir, c.workers);
  return run;
}

std::vector<double> RunOursAlternating(const std::vector<TrainConfig>& configs,
                                       const models::TrainGraph& tg, const RunOptions& o,
                                       int rounds) {
  if (configs.empty()) return {};
  std::string log_dir;
  auto [cluster, client] = StartOurs(configs.front().workers, o, &log_dir);
  RunOptions plain = o;
  plain.batched = false;
  plain.explain = false;
  std::vector<std::vector<double>> per_round(configs.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < configs.size(); ++k) {
      // Odd rounds in reverse order (A B, B A, ...): neither is always first after a switch.
      const size_t i = r % 2 == 0 ? k : configs.size() - 1 - k;
      per_round[i].push_back(TimeSession(*client, configs[i], tg, plain, nullptr).median_ms);
    }
  }
  std::vector<double> medians;
  for (const std::vector<double>& m : per_round) medians.push_back(Median(m));
  return medians;
}

namespace {

constexpr char kRanksKilled[] = "train_bench: killed the ranks of the peer after";

PeerRun RunPeerOnce(const std::string& cmd) {
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
    if (line.rfind(kRanksKilled, 0) == 0) run.note = line.substr(13, line.size() - 14);
    size_t p = line.find("OpenBLAS core=");
    if (p != std::string::npos) {
      run.core = line.substr(p + 14);
      while (!run.core.empty() && isspace(static_cast<unsigned char>(run.core.back()))) {
        run.core.pop_back();
      }
    }
  }
  const int status = pclose(pipe);
  if (status != 0 || run.median_ms < 0) {
    run.error = absl::StrCat("exit status ", status, "; output:\n", all);
  }
  return run;
}

}  // namespace

PeerRun RunPeer(const TrainConfig& c, const RunOptions& o) {
  const std::string script = absl::StrCat(o.peers_dir, "/", c.model, "_bench.py");
  const std::string env =
      o.peer_coretype.empty() ? "" : absl::StrCat("OPENBLAS_CORETYPE=", o.peer_coretype, " ");
  const int64_t allowance = c.model == "mlp" ? 2 : (c.size == "model" ? 15 : 4);
  const int64_t timeout =
      o.peer_timeout > 0 ? o.peer_timeout : 120 + (c.warmup + c.steps) * allowance;
  // After `timeout` seconds the script's ranks (its children) are killed, so that a script whose
  // rank hangs in its teardown after queueing the results still prints them; 30 s later the
  // script itself, if it still waits for a rank that never reported.
  const std::string cmd = absl::StrCat(
      env, o.python, " ", script, " ", c.peer_args, " --steps ", c.steps, " --warmup ", c.warmup,
      " 2>&1 & p=$!; (sleep ", timeout, " >/dev/null 2>&1; echo '", kRanksKilled, " ", timeout,
      " s'; pkill -KILL -P $p; sleep 30 >/dev/null 2>&1; kill -KILL $p) 2>/dev/null & w=$!; "
      "wait $p; s=$?; kill $w 2>/dev/null; exit $s");
  // (The sleeps write nowhere: an orphaned one must not hold the pipe open after the script.)
  std::fprintf(stderr, "  peer: %s\n", cmd.c_str());
  PeerRun run = RunPeerOnce(cmd);
  if (!run.error.empty()) {
    std::fprintf(stderr, "  peer failed, trying once more: %s\n", run.error.c_str());
    run = RunPeerOnce(cmd);
  }
  return run;
}

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

}  // namespace bench
}  // namespace meshrt
