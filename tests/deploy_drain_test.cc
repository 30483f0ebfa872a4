// Graceful shutdown and start order with real daemons on loopback: a worker given SIGTERM (what
// Kubernetes sends before deleting a pod) lets its step in flight finish, deregisters and exits
// 0, and the session that used it fails at once with an error naming the worker and the reason,
// long before its heartbeats would have been missed; while a session waits for workers, the
// coordinator lists the ranks it misses.
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "client/random_feeds.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// Heartbeats would take 60 s to notice a silent worker: any prompt failure comes from the drain.
LocalClusterOptions Options(int workers) {
  LocalClusterOptions o;
  o.workers = workers;
  o.coordinator_command = {"coordinator/meshrt-coordinator"};
  o.worker_command = {"worker/meshrt-worker"};
  o.coordinator_flags = {"--heartbeat_interval_ms=200", "--heartbeat_timeout_ms=60000",
                         "--collective_timeout_ms=10000"};
  o.worker_flags = {"--drain_timeout_s=5"};
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) o.log_dir = dir;
  return o;
}

// y = relu(x . w1) . w2 with enough work per step (~0.3 GFLOP) that steps overlap the signal.
v1::Graph Mlp() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 256}, {"d_in", 256}}));
  TensorRef w1 = b.Placeholder("w1", Shape({{"d_in", 256}, {"hidden", 1024}}));
  TensorRef w2 = b.Placeholder("w2", Shape({{"hidden", 1024}, {"d_out", 256}}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 256}, {"hidden", 1024}}), "h"), "r");
  b.MarkOutput(b.Einsum({h, w2}, Shape({{"batch", 256}, {"d_out", 256}}), "y"));
  return b.proto();
}

// Sums of 1024 float products in different orders: reassociation alone reaches ~1e-4 relative;
// a wrong or missing slice is off by order 1.
constexpr double kTolerance = 1e-3;

std::unique_ptr<Client> Connect(const LocalCluster& cluster) {
  ClientOptions co = cluster.client_options();
  auto client = Client::Connect(co);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

TEST(DrainTest, SigtermFinishesTheStepDeregistersAndFailsTheSessionAtOnce) {
  ASSERT_OK_AND_ASSIGN(auto cluster, LocalCluster::Start(Options(4)));
  std::unique_ptr<Client> client = Connect(*cluster);
  ASSERT_NE(client, nullptr);
  const v1::Graph proto = Mlp();
  ASSERT_OK_AND_ASSIGN(Graph graph, Graph::Build(proto));
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("rows:2,cols:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("batch:rows,hidden:cols", mesh));
  ASSERT_OK_AND_ASSIGN(auto session, client->CreateSession(proto, mesh, rules));
  const TensorMap feeds = RandomFeeds(graph, 5);
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(graph, feeds));

  // Steps back to back in one thread; SIGTERM to worker 2 (mesh coordinate (1,0)) meanwhile.
  std::atomic<int> ok_steps{0};
  std::atomic<bool> wrong{false};
  absl::Status first_failure;
  absl::Time failed_at;
  std::thread steps([&] {
    for (int i = 0; i < 1000; ++i) {
      absl::StatusOr<TensorMap> got = session->Run(feeds, {});
      if (!got.ok()) {
        first_failure = got.status();
        failed_at = absl::Now();
        return;
      }
      if (MaxRelativeError(got->at("y"), want.at("y")) > kTolerance) wrong = true;
      ++ok_steps;
    }
  });
  while (ok_steps.load() < 3) absl::SleepFor(absl::Milliseconds(5));
  const absl::Time signalled = absl::Now();
  ASSERT_OK_AND_ASSIGN(int exit_code, cluster->TerminateWorker(2, absl::Seconds(10)));
  steps.join();

  std::cout << ok_steps.load() << " steps before the failure; then, "
            << absl::FormatDuration(failed_at - signalled) << " after SIGTERM: " << first_failure
            << std::endl;
  EXPECT_EQ(exit_code, 0);
  EXPECT_FALSE(wrong.load()) << "a step that completed returned a wrong value";
  ASSERT_FALSE(first_failure.ok()) << "1000 steps ran although a worker left";
  EXPECT_LT(failed_at - signalled, absl::Seconds(8)) << first_failure;
  // The step in flight finished; the next one failed, naming the worker and why.
  const std::string m(first_failure.message());
  EXPECT_TRUE(absl::StrContains(m, "shutting down (SIGTERM)")) << m;
  EXPECT_TRUE(absl::StrContains(m, "mesh coordinate (1,0)")) << m;

  // The coordinator dropped it: three workers left, and a new session on two of them works.
  ASSERT_OK_AND_ASSIGN(v1::ListWorkersResponse list, client->ListWorkers());
  EXPECT_EQ(list.workers_size(), 3);
  ASSERT_OK_AND_ASSIGN(Mesh two, Mesh::Parse("p:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules split, LayoutRules::Parse("hidden:p", two));
  (void)session->Close();
  ASSERT_OK_AND_ASSIGN(auto again, client->CreateSession(proto, two, split));
  ASSERT_OK_AND_ASSIGN(TensorMap got, again->Run(feeds, {}));
  EXPECT_LE(MaxRelativeError(got.at("y"), want.at("y")), kTolerance);
}

TEST(DrainTest, AWaitingSessionShowsTheRanksItMisses) {
  ASSERT_OK_AND_ASSIGN(auto cluster, LocalCluster::Start(Options(2)));  // ranks 0 and 1
  std::unique_ptr<Client> client = Connect(*cluster);
  ASSERT_NE(client, nullptr);
  const v1::Graph proto = Mlp();
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("rows:2,cols:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("batch:rows", mesh));
  absl::Status created;
  std::thread waiter(
      [&] { created = client->CreateSession(proto, mesh, rules, absl::Seconds(3)).status(); });
  std::string waiting;
  for (int i = 0; i < 200 && waiting.empty(); ++i) {
    auto list = client->ListWorkers();
    if (list.ok() && list->waiting_size() > 0) waiting = list->waiting(0);
    absl::SleepFor(absl::Milliseconds(10));
  }
  waiter.join();
  EXPECT_TRUE(absl::StrContains(waiting, "rank 2 not registered; rank 3 not registered"))
      << waiting;
  EXPECT_TRUE(absl::StrContains(waiting, "rows:2,cols:2")) << waiting;
  EXPECT_EQ(created.code(), absl::StatusCode::kInvalidArgument) << created;
  EXPECT_TRUE(absl::StrContains(created.message(), "missing: rank 2 not registered")) << created;
  ASSERT_OK_AND_ASSIGN(v1::ListWorkersResponse after, client->ListWorkers());
  EXPECT_EQ(after.waiting_size(), 0);
}

}  // namespace
}  // namespace meshrt
