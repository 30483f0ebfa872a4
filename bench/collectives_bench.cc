// Collectives through GlooCommunicator (the worker's path) against raw Gloo on the same machine,
// 2 ranks as 2 processes on loopback, and against the PyTorch+gloo peer script. Allreduce,
// allgather, alltoall and reduce-scatter; raw Gloo's only reduce-scatter is the class API
// gloo::ReduceScatterHalvingDoubling (in place: rank r's reduced chunk lands at the front of its
// buffer), built once per size outside the timing and then run().
//
//   bazel run -c opt //bench:collectives_bench [-- --sizes_mib=1,16,64 --iters=20 --warmup=5]
//
// The parent forks one child per rank. Raw Gloo rendezvouses through gloo::rendezvous::FileStore,
// ours through worker/gloo_file_kv_store.h, both in a fresh temp dir. Ours runs with its defaults,
// so its 2-rank group uses the same-host path (worker/gloo_same_host.h); `--same_host_copy=false`
// measures its TCP path. Each (op, size) also checks that ours and raw produce identical outputs.
// Per size and op the ranks run ours and raw interleaved (A B A B ...), each iteration after a
// barrier; an iteration's time is the slowest rank's. Reported: medians of bytes per rank / time in
// GB/s (the torch script's "algbw": allreduce = the reduced tensor, allgather = each rank's input,
// alltoall and reducescatter = each rank's whole input), ratio ours/raw, and for allreduce the
// torch peer's algbw and ours/torch. The peer runs after ours, never at the same time
// (`--torch_peer=` to skip it).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/math.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"
#include "runtime/kv_store.h"
#include "worker/gloo_communicator.h"
#include "worker/gloo_file_kv_store.h"

ABSL_FLAG(std::vector<std::string>, sizes_mib, std::vector<std::string>({"1", "16", "64"}),
          "bytes per rank, MiB");
ABSL_FLAG(int, iters, 20, "timed iterations per op, size and implementation");
ABSL_FLAG(int, warmup, 5, "untimed iterations per op, size and implementation");
ABSL_FLAG(std::vector<std::string>, ops,
          std::vector<std::string>({"allreduce", "allgather", "alltoall", "reducescatter"}),
          "collectives to measure (all but allreduce only at sizes >= 16 MiB)");
ABSL_FLAG(bool, same_host_copy, true, "GlooCommunicator::Options::same_host_copy");
ABSL_FLAG(std::string, torch_peer, meshrt::bench::DefaultPeersDir() + "/gloo_collectives.py",
          "PyTorch peer script run with /usr/bin/python3 after ours (default: in $MESHRT_PEERS_DIR, "
          "else shared/peers beside the checkout); empty to skip");

namespace meshrt {
namespace {

constexpr int kWorld = 2;

using bench::CheckOk;
using bench::Die;
using bench::MaxDoubles;

// One rank: runs every (op, size), interleaving ours and raw; rank 0 writes
// "op mib ours_median_s raw_median_s" lines to `results`.
void RunRank(int rank, const std::string& dir, const std::string& results) {
  // Raw Gloo: our own device and context, FileStore rendezvous.
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(dir + "/raw");
  auto raw = std::make_shared<gloo::rendezvous::Context>(rank, kWorld);
  raw->setTimeout(std::chrono::seconds(60));
  raw->connectFullMesh(file_store, device);

  // Ours.
  FileKeyValueStore kv(dir + "/ours");
  GlooCommunicator::Options options;
  options.mesh = *Mesh::Parse("x:2");
  options.coordinate = {rank};
  options.hostname = "127.0.0.1";
  options.prefix = "bench";
  options.timeout = absl::Seconds(60);
  options.store = &kv;
  options.same_host_copy = absl::GetFlag(FLAGS_same_host_copy);
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> ours = GlooCommunicator::Create(options);
  CheckOk(ours.status());
  CheckOk((*ours)->Connect({{0}}));

  auto barrier = [&] {
    gloo::BarrierOptions opts(raw);
    gloo::barrier(opts);
  };
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iters = absl::GetFlag(FLAGS_iters);
  std::ofstream out;
  if (rank == 0) out.open(results);

  for (const std::string& op : absl::GetFlag(FLAGS_ops)) {
    for (const std::string& mib_text : absl::GetFlag(FLAGS_sizes_mib)) {
      const int64_t mib = std::stoll(mib_text);
      if (op != "allreduce" && mib < 16) continue;
      const int64_t bytes = mib << 20;
      const int64_t n = bytes / sizeof(float);
      // Separate buffers per implementation; allreduce sums grow by 2x per call, far from inf.
      std::vector<float> in_ours(n, 1.0f), in_raw(n, 1.0f);
      std::vector<float> out_ours(op == "allgather"       ? kWorld * n
                                  : op == "reducescatter" ? n / kWorld
                                                          : n);
      std::vector<float> out_raw(out_ours.size());
      std::function<void()> run_ours, run_raw;
      std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> raw_rs;
      if (op == "allreduce") {
        run_ours = [&] {
          CheckOk((*ours)->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, in_ours.data(), n));
        };
        run_raw = [&] {
          gloo::AllreduceOptions opts(raw);
          opts.setOutput(in_raw.data(), n);
          opts.setReduceFunction(
              static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          gloo::allreduce(opts);
        };
      } else if (op == "allgather") {
        run_ours = [&] {
          CheckOk((*ours)->AllGather({0}, in_ours.data(), bytes, out_ours.data()));
        };
        run_raw = [&] {
          gloo::AllgatherOptions opts(raw);
          opts.setInput(in_raw.data(), n);
          opts.setOutput(out_raw.data(), kWorld * n);
          gloo::allgather(opts);
        };
      } else if (op == "alltoall") {
        run_ours = [&] {
          CheckOk((*ours)->AllToAll({0}, in_ours.data(), out_ours.data(), bytes / kWorld));
        };
        run_raw = [&] {
          gloo::AlltoallOptions opts(raw);
          opts.setInput(in_raw.data(), n);
          opts.setOutput(out_raw.data(), n);
          gloo::alltoall(opts);
        };
      } else if (op == "reducescatter") {
        // Rank-dependent values, so the check below also proves both put the same chunk on the
        // same rank. Raw reduces in place (values grow by at most 2x per call, far from inf).
        for (int64_t i = 0; i < n; ++i) in_ours[i] = in_raw[i] = static_cast<float>(i % 13 + rank);
        run_ours = [&] {
          CheckOk((*ours)->ReduceScatter({0}, v1::REDUCE_SUM, DType::kFloat32, in_ours.data(),
                                         n / kWorld, out_ours.data()));
        };
        raw_rs = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            raw, std::vector<float*>{in_raw.data()}, static_cast<int>(n),
            std::vector<int>(kWorld, static_cast<int>(n / kWorld)));
        run_raw = [&] { raw_rs->run(); };
        run_ours();
        run_raw();
        if (!std::equal(out_ours.begin(), out_ours.end(), in_raw.begin())) {
          Die(absl::StrCat(op, " at ", mib, " MiB: ours and raw Gloo disagree"));
        }
      } else {
        Die(absl::StrCat("unknown op ", op));
      }
      for (int i = 0; i < warmup; ++i) {
        run_ours();
        run_raw();
      }
      // times[2*i] = ours, times[2*i+1] = raw, iteration i.
      std::vector<double> times(2 * iters);
      for (int i = 0; i < iters; ++i) {
        for (int which = 0; which < 2; ++which) {
          barrier();
          const auto start = std::chrono::steady_clock::now();
          (which == 0 ? run_ours : run_raw)();
          times[2 * i + which] =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
      }
      // Both did the same calls on the same inputs: the outputs must agree (sums of ones are
      // exact). Reduce-scatter was checked before the timing (raw's input is its output).
      const bool same = op == "reducescatter" ? true
                        : op == "allreduce"   ? in_ours == in_raw
                                              : out_ours == out_raw;
      if (!same) Die(absl::StrCat(op, " at ", mib, " MiB: ours and raw Gloo disagree"));
      // The slowest rank per iteration.
      gloo::AllreduceOptions opts(raw);
      opts.setOutput(times.data(), times.size());
      opts.setReduceFunction(&MaxDoubles);
      gloo::allreduce(opts);
      std::vector<double> t_ours, t_raw;
      for (int i = 0; i < iters; ++i) {
        t_ours.push_back(times[2 * i]);
        t_raw.push_back(times[2 * i + 1]);
      }
      if (rank == 0)
        out << op << " " << mib << " " << Median(t_ours) << " " << Median(t_raw) << "\n";
    }
  }
  out.close();
  CheckOk((*ours)->Shutdown());
  barrier();
}

// Parses the peer script's table: "| allreduce | 16 | med ms | min | max | algbw | busbw |".
std::map<std::pair<std::string, int64_t>, double> RunTorchPeer(const std::string& script) {
  std::map<std::pair<std::string, int64_t>, double> gbps;
  std::string sizes, ops;
  for (const std::string& s : absl::GetFlag(FLAGS_sizes_mib)) absl::StrAppend(&sizes, " ", s);
  for (const std::string& op : absl::GetFlag(FLAGS_ops)) {
    // torch 1.13's gloo has no reduce_scatter: the script reports it unsupported (row left "-").
    absl::StrAppend(&ops, " ",
                    op == "alltoall"        ? "all_to_all"
                    : op == "reducescatter" ? "reduce_scatter"
                                            : op);
  }
  const std::string cmd = absl::StrCat("/usr/bin/python3 ", script, " --world 2 --sizes-mib", sizes,
                                       " --iters ", absl::GetFlag(FLAGS_iters), " --ops", ops);
  fprintf(stderr, "running the peer: %s\n", cmd.c_str());
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return gbps;
  char line[1024];
  while (fgets(line, sizeof(line), pipe) != nullptr) {
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    // "", op, MiB, median, min, max, algbw, busbw, "\n"
    if (cells.size() < 8) continue;
    std::string op(absl::StripAsciiWhitespace(cells[1]));
    int64_t mib = 0;
    double algbw = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(cells[2]), &mib) ||
        !absl::SimpleAtod(absl::StripAsciiWhitespace(cells[6]), &algbw)) {
      continue;
    }
    if (op == "all_to_all") op = "alltoall";
    if (op == "reduce_scatter") op = "reducescatter";
    gbps[{op, mib}] = algbw;
  }
  pclose(pipe);
  return gbps;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  char tmpl[] = "/tmp/collectives_bench_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
  const std::string dir = tmpl;
  mkdir((dir + "/raw").c_str(), 0700);
  mkdir((dir + "/ours").c_str(), 0700);
  const std::string results = dir + "/results.txt";

  // Fork before any thread exists in this process.
  std::vector<pid_t> children;
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) Die("fork failed");
    if (pid == 0) {
      try {
        RunRank(rank, dir, results);
      } catch (const std::exception& e) {  // raw Gloo throws
        Die(absl::StrCat("rank ", rank, ": ", e.what()));
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) Die("a rank failed");

  std::map<std::pair<std::string, int64_t>, double> torch;
  const std::string script = absl::GetFlag(FLAGS_torch_peer);
  if (!script.empty() && access(script.c_str(), R_OK) == 0) torch = RunTorchPeer(script);

  printf(
      "# 2 ranks = 2 processes on 127.0.0.1; GB/s = bytes per rank / median time of the\n"
      "# slowest rank (%d timed iterations after %d warmup, ours and raw interleaved);\n"
      "# ours with same_host_copy=%s\n",
      absl::GetFlag(FLAGS_iters), absl::GetFlag(FLAGS_warmup),
      absl::GetFlag(FLAGS_same_host_copy) ? "true" : "false");
  printf("| op | MiB/rank | ours GB/s | raw Gloo GB/s | ours/raw | torch GB/s | ours/torch |\n");
  printf("|---|---|---|---|---|---|---|\n");
  std::ifstream in(results);
  std::string op;
  int64_t mib;
  double t_ours, t_raw;
  while (in >> op >> mib >> t_ours >> t_raw) {
    const double bytes = static_cast<double>(mib << 20);
    const double ours = bytes / t_ours / 1e9, raw = bytes / t_raw / 1e9;
    auto it = torch.find({op, mib});
    const std::string t = it == torch.end() ? "-" : absl::StrFormat("%.2f", it->second);
    const std::string r = it == torch.end() ? "-" : absl::StrFormat("%.2f", ours / it->second);
    printf("| %s | %lld | %.2f | %.2f | %.2f | %s | %s |\n", op.c_str(),
           static_cast<long long>(mib), ours, raw, ours / raw, t.c_str(), r.c_str());
  }
  std::string cleanup = absl::StrCat("rm -rf ", dir);
  if (system(cleanup.c_str()) != 0) fprintf(stderr, "could not remove %s\n", dir.c_str());
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::Main(argc, argv); }
