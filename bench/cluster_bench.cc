// Costs of the service path, on a local cluster of real processes (coordinator + 4 workers):
//   - per-step overhead: a tiny graph (8 floats, one local op) on a 1-D mesh of 4, client ->
//     coordinator -> 4 workers -> back; median and p90 of many steps;
//   - feed/fetch throughput through the coordinator: a big tensor in and its negation out, split
//     over the 4 workers and replicated; GB/s = (bytes fed + bytes fetched) / step time.
// Run: bazel run -c opt //bench:cluster_bench [-- --steps=N --feed_steps=M]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "core/ops/builder.h"
#include "util/flags.h"

namespace meshrt {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// Step times in ms of `graph` under `layout` on mesh p:4 with `feeds`.
std::vector<double> TimeSteps(Client& client, const v1::Graph& graph, const std::string& layout,
                              const TensorMap& feeds, int warmup, int steps) {
  Mesh mesh = Mesh::Parse("p:4").value();
  auto session = client.CreateSession(graph, mesh, LayoutRules::Parse(layout, mesh).value());
  if (!session.ok()) {
    std::fprintf(stderr, "session: %s\n", std::string(session.status().message()).c_str());
    std::exit(1);
  }
  std::vector<double> ms;
  for (int i = 0; i < warmup + steps; ++i) {
    absl::Time t0 = absl::Now();
    auto out = (*session)->Run(feeds, {"y"});
    double dt = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (!out.ok()) {
      std::fprintf(stderr, "step: %s\n", std::string(out.status().message()).c_str());
      std::exit(1);
    }
    if (i >= warmup) ms.push_back(dt);
  }
  return ms;
}

v1::Graph NegGraph(int64_t rows, int64_t cols) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", rows}, {"b", cols}}));
  b.Neg(x, "y");
  return b.proto();
}

int Main(int argc, char** argv) {
  int64_t steps = 300;
  int64_t feed_steps = 9;
  FlagSet flags("cluster_bench [--steps N] [--feed_steps M]",
                "Per-step overhead and feed/fetch throughput.");
  flags.Int("steps", &steps, "timed steps for the overhead measurement");
  flags.Int("feed_steps", &feed_steps,
            "timed steps per feed/fetch case (after 2 untimed ones; the median is reported)");
  if (!flags.Parse(argc, argv).ok() || flags.help()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  LocalClusterOptions options;
  options.workers = 4;
  options.coordinator_command = {"client/meshrt", "coordinator"};
  options.worker_command = {"client/meshrt", "worker"};
  options.log_dir = "/tmp";
  auto cluster = LocalCluster::Start(options);
  if (!cluster.ok()) {
    std::fprintf(stderr, "cluster: %s\n", std::string(cluster.status().message()).c_str());
    return 1;
  }
  ClientOptions co = (*cluster)->client_options();
  auto client = Client::Connect(co);
  if (!client.ok()) return 1;

  {
    v1::Graph g = NegGraph(8, 1);
    TensorMap feeds{{"x", Tensor(DType::kFloat32, Shape({{"a", 8}, {"b", 1}}))}};
    std::vector<double> ms = TimeSteps(**client, g, "a:p", feeds, 30, static_cast<int>(steps));
    std::printf("per-step overhead, tiny graph on 4 workers (mesh p:4), %zu steps:\n", ms.size());
    std::printf("  median %.3f ms   p90 %.3f ms   min %.3f ms   (goal: median <= 1 ms)\n\n",
                Median(ms), Percentile(ms, 0.9), Percentile(ms, 0.0));
  }
  std::printf("feed/fetch throughput through the coordinator (x in, y = -x out), 4 workers:\n");
  std::printf("  %-10s %-12s %12s %14s\n", "tensor", "layout", "step ms", "GB/s (in+out)");
  for (int64_t mib : {16, 64}) {
    const int64_t rows = mib * 256;  // rows x 1024 floats = mib MiB
    v1::Graph g = NegGraph(rows, 1024);
    TensorMap feeds{{"x", Tensor(DType::kFloat32, Shape({{"a", rows}, {"b", 1024}}))}};
    for (const char* layout : {"a:p", ""}) {
      const int timed = static_cast<int>(std::max<int64_t>(feed_steps, 1));
      std::vector<double> ms = TimeSteps(**client, g, layout, feeds, 2, timed);
      const double bytes = 2.0 * mib * (1 << 20);
      std::printf("  %3lld MiB    %-12s %12.1f %14.2f\n", static_cast<long long>(mib),
                  *layout ? layout : "replicated", Median(ms), bytes / (Median(ms) * 1e6));
    }
  }
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::Main(argc, argv); }
