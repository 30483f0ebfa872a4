// Reshard bandwidth per kind: a one-step v1::Program built with core's ProgramBuilder (an input and
// one Reshard to a target layout), run by runtime's Executor on every worker of a 1-D mesh x:W,
// each worker a separate process with a GlooCommunicator (the worker's path), against the matching
// raw Gloo collective on the same bytes.
//
//   bazel run -c opt //bench:reshard_bench [-- --workers=2,4 --sizes_mib=16,64 --iters=15]
//
// Kinds, on a float32 tensor [a: MiB*256, b: 1024] (MiB = the global tensor's size):
//   allgather       [a:x] -> replicated                      ALLGATHER
//   alltoall        [a:x] -> [b:x]                           ALLTOALL
//   reduce-scatter  replicated, partial sum over x -> [a:x]  REDUCE_SCATTER
//   allreduce       replicated, partial sum over x -> replicated  ALLREDUCE
//   local-slice     replicated -> [a:x]                      LOCAL_SLICE (no communication)
// The partial-sum inputs are LaidOutTensors with partial_sum_axes = {x}: each worker is fed a whole
// tensor, its own addend.
//
// Per kind, size and W, the W ranks run three implementations interleaved (A B C A B C ...), each
// iteration after a barrier, and an iteration's time is the slowest rank's:
//   reshard  Executor::Run of the program (includes what the executor does around the collective:
//            copying the feed into its pooled buffer, or with --move_feeds moving a copy made
//            before the timing in, as the worker moves its decoded feeds; packing chunks along a
//            split dim that is not outermost, concatenating along such a concat dim);
//   comm     the GlooCommunicator call alone on buffers of the same size (where the executor's
//            time goes: reshard vs comm is executor overhead);
//   raw      raw Gloo on contexts of its own (FileStore rendezvous, TCP loopback): gloo::allgather,
//            gloo::alltoall, gloo::allreduce (ring), and gloo::ReduceScatterHalvingDoubling (Gloo's
//            only reduce-scatter: the class API, in place); none for local-slice.
// Bytes = what each worker sends for the program per core/planning/explain.h CostOf (summed over its
// instructions); GB/s = those bytes / median time, for all three (same bytes, so the ratio
// reshard/raw is raw time / reshard time). Before timing, each kind's output is checked on every
// rank against the slice of the expected global tensor.
//
// GlooCommunicator runs with its defaults, so groups of two processes on one host use its
// same-host path (direct cross-process copies; worker/gloo_same_host.h) while raw Gloo uses TCP;
// `--same_host_copy=false` puts ours on TCP too. Groups of four always use TCP. W=4 on a 2-core
// machine is oversubscribed (4 processes, 2 cores).
// `--malloc_keep` (a diagnosis, not the worker's configuration) stops glibc from unmapping freed
// big blocks, so the executor's per-step buffers are not page-faulted in again on every Run.
#include <malloc.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "core/ir/mesh.h"
#include "core/ir/program_builder.h"
#include "core/ir/shape.h"
#include "core/ir/slicing.h"
#include "core/ir/tensor.h"
#include "core/planning/explain.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/math.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"
#include "proto/program.pb.h"
#include "runtime/executor.h"
#include "worker/gloo_communicator.h"
#include "worker/gloo_file_kv_store.h"

ABSL_FLAG(std::vector<std::string>, workers, std::vector<std::string>({"2", "4"}),
          "worker process counts (each a 1-D mesh x:W); W must divide 1024");
ABSL_FLAG(std::vector<std::string>, sizes_mib, std::vector<std::string>({"16", "64"}),
          "global tensor sizes, MiB");
ABSL_FLAG(std::vector<std::string>, kinds,
          std::vector<std::string>({"allgather", "alltoall", "reduce-scatter", "allreduce",
                                    "local-slice"}),
          "reshard kinds to measure");
ABSL_FLAG(int, iters, 15, "timed iterations per kind, size, W and implementation");
ABSL_FLAG(int, warmup, 3, "untimed iterations per kind, size, W and implementation");
ABSL_FLAG(bool, same_host_copy, true, "GlooCommunicator::Options::same_host_copy");
ABSL_FLAG(bool, move_feeds, false,
          "time Executor::Run(map&&) on a fresh copy of the feeds made before the timing (the "
          "worker's path: it moves its decoded feeds in) instead of Run(const map&), which copies "
          "the feed into the executor's pooled storage inside the timing");
ABSL_FLAG(bool, malloc_keep, false,
          "diagnosis: in each rank, mallopt(M_MMAP_MAX, 0) and a 2 GiB M_TRIM_THRESHOLD, so freed "
          "buffers are reused instead of unmapped and page-faulted in again on the next step");

namespace meshrt {
namespace {

constexpr int64_t kCols = 1024;

using bench::CheckOk;
using bench::Die;
using bench::MaxDoubles;

struct Kind {
  TensorLayout from;
  TensorLayout to;
  bool partial_sum = false;
};

Kind KindOf(const std::string& name) {
  const TensorLayout split_a{{0, kReplicated}}, split_b{{kReplicated, 0}},
      repl{{kReplicated, kReplicated}};
  if (name == "allgather") return {split_a, repl, false};
  if (name == "alltoall") return {split_a, split_b, false};
  if (name == "reduce-scatter") return {repl, split_a, true};
  if (name == "allreduce") return {repl, repl, true};
  if (name == "local-slice") return {repl, split_a, false};
  Die(absl::StrCat("unknown kind ", name));
  return {};
}

// "allgather", "local_slice", ... joined by '+': what the program does.
std::string StepsOf(const v1::Program& p) {
  std::vector<std::string> steps;
  for (const v1::Instruction& inst : p.instructions()) {
    if (inst.has_collective()) {
      steps.push_back(absl::AsciiStrToLower(v1::Collective::Kind_Name(inst.collective().kind())));
    } else if (inst.has_local_slice()) {
      steps.push_back("local_slice");
    } else {
      steps.push_back("local");
    }
  }
  return steps.empty() ? "none" : absl::StrJoin(steps, "+");
}

// One rank of a world of `world`: every (kind, size), interleaving reshard, comm and raw; rank 0
// appends "kind W mib steps sent_bytes t_reshard t_comm t_raw" lines (-1 = not measured).
void RunRank(int rank, int world, const std::string& dir, const std::string& results) {
  if (absl::GetFlag(FLAGS_malloc_keep)) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 2047 << 20);
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(dir + "/raw");
  auto raw = std::make_shared<gloo::rendezvous::Context>(rank, world);
  raw->setTimeout(std::chrono::seconds(300));
  raw->connectFullMesh(file_store, device);

  const Mesh mesh = *Mesh::Parse(absl::StrCat("x:", world));
  const std::vector<int64_t> coord = {rank};
  FileKeyValueStore kv(dir + "/ours");
  GlooCommunicator::Options options;
  options.mesh = mesh;
  options.coordinate = coord;
  options.hostname = "127.0.0.1";
  options.prefix = "reshard_bench";
  options.timeout = absl::Seconds(300);
  options.store = &kv;
  options.same_host_copy = absl::GetFlag(FLAGS_same_host_copy);
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> made = GlooCommunicator::Create(options);
  CheckOk(made.status());
  GlooCommunicator& comm = **made;
  CheckOk(comm.Connect({{0}}));

  auto barrier = [&] {
    gloo::BarrierOptions opts(raw);
    gloo::barrier(opts);
  };
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iters = absl::GetFlag(FLAGS_iters);
  std::ofstream out;
  if (rank == 0) out.open(results, std::ios::app);

  for (const std::string& kind_name : absl::GetFlag(FLAGS_kinds)) {
    const Kind kind = KindOf(kind_name);
    for (const std::string& mib_text : absl::GetFlag(FLAGS_sizes_mib)) {
      const int64_t mib = std::stoll(mib_text);
      const Shape shape({{"a", mib * 256}, {"b", kCols}});
      const int64_t n = shape.num_elements();  // global elements

      ProgramBuilder builder(mesh, LayoutRules());
      absl::StatusOr<LaidOutTensor> x = builder.AddInput("x", shape, DType::kFloat32, kind.from);
      CheckOk(x.status());
      if (kind.partial_sum) x->partial_sum_axes = {0};
      absl::StatusOr<LaidOutTensor> resharded = builder.Reshard(*x, kind.to, kind_name);
      CheckOk(resharded.status());
      CheckOk(builder.BindOutput("y", *resharded));
      const v1::Program program = std::move(builder).Finish();
      int64_t sent = 0;
      for (int i = 0; i < program.instructions_size(); ++i) sent += CostOf(program, i).sent_bytes;
      Executor executor(program, coord, /*kernels=*/nullptr, &comm);

      // Feeds and the check: x[i] = i % 1000; a partial-sum rank r is fed (r + 1) * x, so the
      // tensor is W(W+1)/2 * x (exact in float32).
      std::map<std::string, Tensor> feeds;
      {
        Tensor global(DType::kFloat32, shape);
        float* g = global.f32();
        for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>(i % 1000);
        Tensor fed = global;
        if (kind.partial_sum) {
          for (int64_t i = 0; i < n; ++i) fed.f32()[i] *= static_cast<float>(rank + 1);
          for (int64_t i = 0; i < n; ++i) g[i] *= static_cast<float>(world * (world + 1) / 2);
        }
        feeds["x"] = ExtractSlice(fed, kind.from, mesh, coord);
        CheckOk(executor.Run(feeds));
        absl::StatusOr<Tensor> y = executor.OutputSlice("y");
        CheckOk(y.status());
        const Tensor expected = ExtractSlice(global, kind.to, mesh, coord);
        if (y->shape() != expected.shape() ||
            std::memcmp(y->f32(), expected.f32(), TensorBytes(expected)) != 0) {
          Die(absl::StrCat(kind_name, " at ", mib, " MiB, rank ", rank, ": wrong output"));
        }
      }

      // The same collective through our communicator alone, and through raw Gloo, on buffers of
      // the sizes the executor hands the communicator.
      const int64_t slice = n / world;  // elements of one worker's slice of a split tensor
      std::vector<float> c_in, c_out, r_in, r_out;
      std::function<void()> run_comm, run_raw;
      std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> raw_rs;
      if (kind_name == "allgather") {
        c_in.assign(slice, 1.0f);
        c_out.resize(n);
        r_in.assign(slice, 1.0f);
        r_out.resize(n);
        run_comm = [&] { CheckOk(comm.AllGather({0}, c_in.data(), slice * 4, c_out.data())); };
        run_raw = [&] {
          gloo::AllgatherOptions opts(raw);
          opts.setInput(r_in.data(), slice);
          opts.setOutput(r_out.data(), n);
          gloo::allgather(opts);
        };
      } else if (kind_name == "alltoall") {
        c_in.assign(slice, 1.0f);
        c_out.resize(slice);
        r_in.assign(slice, 1.0f);
        r_out.resize(slice);
        run_comm = [&] {
          CheckOk(comm.AllToAll({0}, c_in.data(), c_out.data(), slice * 4 / world));
        };
        run_raw = [&] {
          gloo::AlltoallOptions opts(raw);
          opts.setInput(r_in.data(), slice);
          opts.setOutput(r_out.data(), slice);
          gloo::alltoall(opts);
        };
      } else if (kind_name == "reduce-scatter") {
        c_in.assign(n, 1.0f);
        c_out.resize(slice);
        r_in.assign(n, 1.0f);
        run_comm = [&] {
          CheckOk(comm.ReduceScatter({0}, v1::REDUCE_SUM, DType::kFloat32, c_in.data(), slice,
                                     c_out.data()));
        };
        // In place: rank r's reduced chunk lands in r_in[0, slice). Values grow by at most W per
        // call, far from inf over these few calls.
        raw_rs = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            raw, std::vector<float*>{r_in.data()}, static_cast<int>(n),
            std::vector<int>(world, static_cast<int>(slice)));
        run_raw = [&] { raw_rs->run(); };
      } else if (kind_name == "allreduce") {
        c_in.assign(n, 1.0f);
        r_in.assign(n, 1.0f);
        run_comm = [&] {
          CheckOk(comm.AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, c_in.data(), n));
        };
        run_raw = [&] {
          gloo::AllreduceOptions opts(raw);
          opts.setOutput(r_in.data(), n);
          opts.setReduceFunction(
              static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          gloo::allreduce(opts);
        };
      }
      const bool move_feeds = absl::GetFlag(FLAGS_move_feeds);
      std::map<std::string, Tensor> fresh;  // --move_feeds: copied before the timing, moved in
      auto run_reshard = [&] {
        if (move_feeds) {
          CheckOk(executor.Run(std::move(fresh)));
        } else {
          CheckOk(executor.Run(feeds));
        }
      };
      std::vector<std::function<void()>> impls = {run_reshard, run_comm, run_raw};

      for (int i = 0; i < warmup; ++i) {
        for (auto& f : impls) {
          if (move_feeds) fresh = feeds;
          if (f) f();
        }
      }
      // times[3*i + k]: iteration i of impls[k]; -1 when impls[k] is empty.
      std::vector<double> times(3 * iters, -1.0);
      for (int i = 0; i < iters; ++i) {
        for (int k = 0; k < 3; ++k) {
          if (!impls[k]) continue;
          if (k == 0 && move_feeds) fresh = feeds;
          barrier();
          const auto start = std::chrono::steady_clock::now();
          impls[k]();
          times[3 * i + k] =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
      }
      gloo::AllreduceOptions opts(raw);
      opts.setOutput(times.data(), times.size());
      opts.setReduceFunction(&MaxDoubles);
      gloo::allreduce(opts);
      double med[3];
      for (int k = 0; k < 3; ++k) {
        std::vector<double> t;
        for (int i = 0; i < iters; ++i) t.push_back(times[3 * i + k]);
        med[k] = impls[k] ? Median(t) : -1.0;
      }
      if (rank == 0) {
        out << kind_name << " " << world << " " << mib << " " << StepsOf(program) << " " << sent
            << " " << med[0] << " " << med[1] << " " << med[2] << std::endl;
      }
    }
  }
  out.close();
  CheckOk(comm.Shutdown());
  barrier();
}

// Forks `world` ranks; true when all exited cleanly.
bool RunWorld(int world, const std::string& results) {
  char tmpl[] = "/tmp/reshard_bench_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
  const std::string dir = tmpl;
  mkdir((dir + "/raw").c_str(), 0700);
  mkdir((dir + "/ours").c_str(), 0700);
  // Fork before any thread exists in this process (the parent never starts one).
  std::vector<pid_t> children;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) Die("fork failed");
    if (pid == 0) {
      try {
        RunRank(rank, world, dir, results);
      } catch (const std::exception& e) {  // raw Gloo throws
        Die(absl::StrCat("W=", world, " rank ", rank, ": ", e.what()));
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
  const std::string cleanup = absl::StrCat("rm -rf ", dir);
  if (system(cleanup.c_str()) != 0) fprintf(stderr, "could not remove %s\n", dir.c_str());
  return ok;
}

std::string Ms(double t) { return t < 0 ? "-" : absl::StrFormat("%.1f", t * 1e3); }
std::string Gbps(double bytes, double t) {
  return t <= 0 || bytes <= 0 ? "-" : absl::StrFormat("%.2f", bytes / t / 1e9);
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  char path[] = "/tmp/reshard_bench_results_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) Die("mkstemp failed");
  close(fd);
  const std::string results = path;

  for (const std::string& w : absl::GetFlag(FLAGS_workers)) {
    const int world = std::stoi(w);
    if (world < 2 || kCols % world != 0) Die(absl::StrCat("bad worker count ", w));
    fprintf(stderr, "reshard_bench: %d worker processes\n", world);
    if (!RunWorld(world, results)) Die(absl::StrCat("a rank failed with W=", world));
  }

  printf(
      "# Reshard on a 1-D mesh x:W, one process per worker, float32 [a: MiB*256, b: 1024].\n"
      "# sent = bytes each worker sends (core/planning/explain.h CostOf); GB/s = sent / median time of the\n"
      "# slowest rank (%d timed iterations after %d warmup; reshard, comm and raw interleaved).\n"
      "# reshard = Executor::Run (GlooCommunicator, same_host_copy=%s); comm = the communicator\n"
      "# call alone; raw = raw Gloo over TCP on the same bytes (reduce-scatter: Gloo's\n"
      "# ReduceScatterHalvingDoubling); ratio = reshard GB/s / raw GB/s.%s%s\n",
      absl::GetFlag(FLAGS_iters), absl::GetFlag(FLAGS_warmup),
      absl::GetFlag(FLAGS_same_host_copy) ? "true" : "false",
      absl::GetFlag(FLAGS_malloc_keep) ? "\n# --malloc_keep: freed memory stays mapped" : "",
      absl::GetFlag(FLAGS_move_feeds)
          ? "\n# --move_feeds: feeds copied before the timing and moved into Run"
          : "\n# feeds copied into the executor's pooled storage inside the timing");
  printf(
      "| kind | W | MiB | steps | sent MiB/worker | reshard ms | reshard GB/s | comm ms | "
      "raw Gloo ms | raw GB/s | reshard/raw |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::ifstream in(results);
  std::string kind, steps;
  int world;
  int64_t mib, sent;
  double t_reshard, t_comm, t_raw;
  while (in >> kind >> world >> mib >> steps >> sent >> t_reshard >> t_comm >> t_raw) {
    const double b = static_cast<double>(sent);
    const std::string ratio =
        t_raw > 0 && sent > 0 ? absl::StrFormat("%.2f", t_raw / t_reshard) : "-";
    printf("| %s | %d | %lld | %s | %s | %s | %s | %s | %s | %s | %s |\n", kind.c_str(), world,
           static_cast<long long>(mib), steps.c_str(),
           sent > 0 ? absl::StrFormat("%.1f", b / (1 << 20)).c_str() : "0", Ms(t_reshard).c_str(),
           Gbps(b, t_reshard).c_str(), Ms(t_comm).c_str(), Ms(t_raw).c_str(),
           Gbps(b, t_raw).c_str(), ratio.c_str());
  }
  unlink(results.c_str());
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::Main(argc, argv); }
