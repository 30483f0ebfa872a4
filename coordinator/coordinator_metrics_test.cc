// The coordinator's metrics with in-process workers: steps and their histogram per session,
// sessions by state, workers, heartbeats, checkpoints, tokens per step, retention of ended
// sessions' series.
#include "coordinator/coordinator_metrics.h"

#include "absl/strings/match.h"
#include "client/random_feeds.h"
#include "coordinator/coordinator.h"
#include "testing/cluster/in_process_workers.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

v1::Graph MlpGraph() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w = b.Placeholder("w", Shape({{"d_in", 16}, {"hidden", 32}}));
  b.MarkOutput(b.Einsum({x, w}, Shape({{"batch", 8}, {"hidden", 32}}), "h"));
  return b.proto();
}

v1::CreateSessionRequest Request() {
  v1::CreateSessionRequest r;
  *r.mutable_graph() = MlpGraph();
  Mesh m = Mesh::Parse("rows:2").value();
  *r.mutable_mesh() = m.ToProto();
  *r.mutable_rules() = LayoutRules::Parse("batch:rows", m).value().ToProto();
  r.set_timeout_ms(2000);
  return r;
}

class CoordinatorMetricsTest : public ::testing::Test {
 protected:
  CoordinatorMetricsTest() : coordinator_(Options(), &workers_) {}
  static CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    o.heartbeat_interval = absl::Milliseconds(100);
    return o;
  }
  void Register(const std::string& address) {
    workers_.AddWorker(address);
    v1::RegisterWorkerRequest r;
    r.set_address(address);
    r.set_incarnation("inc-" + address);
    r.set_secret("secret-of-" + address + "-0123456789");
    ASSERT_OK(coordinator_.RegisterWorker(r).status());
  }
  std::string Text() { return coordinator_.metrics().registry().Render(); }
  bool Has(const std::string& line) {
    const std::string text = Text();
    const bool has = absl::StrContains(text, "\n" + line + "\n");
    if (!has) ADD_FAILURE() << "no line '" << line << "' in\n" << text;
    return has;
  }

  InProcessWorkers workers_;
  Coordinator coordinator_;
};

TEST_F(CoordinatorMetricsTest, StepsWorkersAndSessions) {
  Has("meshrt_coordinator_workers_registered 0");
  Has("meshrt_coordinator_sessions{state=\"ready\"} 0");
  Register("w0");
  Register("w1");
  Has("meshrt_coordinator_workers_registered 2");
  Has("meshrt_coordinator_workers_alive 2");
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request()));
  Has("meshrt_coordinator_sessions{state=\"ready\"} 1");
  Has("meshrt_coordinator_workers_busy 2");
  const Graph g = Graph::Build(MlpGraph()).value();
  const TensorMap feeds = RandomFeeds(g, 1);
  ASSERT_OK(coordinator_.RunStep(s.session(), feeds, {}).status());
  ASSERT_OK(coordinator_.RunStep(s.session(), feeds, {}, /*num_steps=*/3).status());
  const std::string id = s.session();
  Has("meshrt_steps_total{session=\"" + id + "\"} 4");
  Has("meshrt_step_duration_seconds_count{session=\"" + id + "\"} 4");
  Has("meshrt_step_duration_seconds_bucket{session=\"" + id + "\",le=\"+Inf\"} 4");
  // Fed from placeholders: no tokens.
  EXPECT_FALSE(absl::StrContains(Text(), "meshrt_tokens_total{"));
  // A bad fetch is refused before dispatch: not a failed step.
  EXPECT_FALSE(coordinator_.RunStep(s.session(), feeds, {"nope"}).ok());
  Has("meshrt_step_failures_total 0");
  ASSERT_OK(coordinator_.CloseSession(id));
  // The ended session's series stay (a scrape after a short run still sees it).
  Has("meshrt_steps_total{session=\"" + id + "\"} 4");
  Has("meshrt_coordinator_sessions{state=\"ready\"} 0");
  Has("meshrt_coordinator_workers_busy 0");
}

TEST_F(CoordinatorMetricsTest, HeartbeatGapsCountMissedOnes) {
  Register("w0");
  absl::SleepFor(absl::Milliseconds(350));  // 3 intervals: 2 heartbeats missed
  v1::ListWorkersResponse list = coordinator_.ListWorkers();
  v1::HeartbeatRequest hb;
  hb.set_worker_id(list.workers(0).worker_id());
  hb.set_incarnation("inc-w0");
  ASSERT_OK(coordinator_.Heartbeat(hb).status());
  const std::string text = Text();
  const size_t at = text.find("\nmeshrt_coordinator_missed_heartbeats_total ");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GE(std::stod(text.substr(at + 44)), 2) << text;
}

TEST_F(CoordinatorMetricsTest, CheckpointsCountByResult) {
  Register("w0");
  Register("w1");
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request()));
  // No --checkpoint_root: refused, counted as an error.
  EXPECT_FALSE(coordinator_.SaveCheckpoint(s.session(), "ck").ok());
  EXPECT_FALSE(coordinator_.RestoreCheckpoint(s.session(), "ck").ok());
  Has("meshrt_checkpoint_saves_total{result=\"error\"} 1");
  Has("meshrt_checkpoint_saves_total{result=\"ok\"} 0");
  Has("meshrt_checkpoint_restores_total{result=\"error\"} 1");
  Has("meshrt_checkpoint_save_duration_seconds_count 0");
}

TEST(CoordinatorMetricsUnitTest, RpcErrorsByMethodAndCode) {
  CoordinatorMetrics m;
  m.RpcDone("RunStep", absl::StatusCode::kOk);
  m.RpcDone("RunStep", absl::StatusCode::kNotFound);
  m.RpcDone("RunStep", absl::StatusCode::kNotFound);
  m.RpcDone("KvGet", absl::StatusCode::kUnauthenticated);
  const std::string text = m.registry().Render();
  EXPECT_TRUE(absl::StrContains(
      text, "meshrt_coordinator_rpc_errors_total{method=\"KvGet\",code=\"UNAUTHENTICATED\"} 1\n"
            "meshrt_coordinator_rpc_errors_total{method=\"RunStep\",code=\"NOT_FOUND\"} 2\n"))
      << text;
  EXPECT_FALSE(absl::StrContains(text, "code=\"OK\"")) << text;
}

TEST(CoordinatorMetricsUnitTest, EndedSessionsSeriesAreRetainedForTheLastFew) {
  CoordinatorMetrics m;
  const int n = CoordinatorMetrics::kRetainedSessions + 3;
  for (int i = 0; i < n; ++i) {
    m.StepsDone(absl::StrCat("s-", i), 2, absl::Milliseconds(10), 64);
    m.SessionEnded(absl::StrCat("s-", i));
  }
  const std::string text = m.registry().Render();
  EXPECT_FALSE(absl::StrContains(text, "session=\"s-2\"")) << text;
  EXPECT_TRUE(absl::StrContains(text, "meshrt_steps_total{session=\"s-3\"} 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "meshrt_tokens_total{session=\"s-3\"} 128\n")) << text;
  EXPECT_TRUE(absl::StrContains(
      text, absl::StrCat("meshrt_step_duration_seconds_count{session=\"s-", n - 1, "\"} 2\n")));
}

// Tokens: the elements of the non-target, non-eval text_windows inputs.
TEST(CoordinatorMetricsUnitTest, TokensPerStepCountsTrainingInputWindows) {
  GraphBuilder b;
  TensorRef step = b.Placeholder("step", Shape(), DType::kInt32);
  auto windows = [&](const char* name, int64_t offset, const char* split) {
    v1::Op op;
    op.set_type("text_windows");
    *op.mutable_shape() = Shape({{"batch", 4}, {"seq", 16}}).ToProto();
    (*op.mutable_attrs())["path"].set_s("/nonexistent");
    (*op.mutable_attrs())["offset"].set_i(offset);
    if (split != nullptr) {
      (*op.mutable_attrs())["split"].set_s(split);
      (*op.mutable_attrs())["eval_fraction"].set_f(0.1f);
    }
    b.MarkOutput(b.Apply(std::move(op), {step}, name));
  };
  windows("x", 0, "train");
  windows("y", 1, "train");
  windows("eval/x", 0, "eval");
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(b.proto()));
  EXPECT_EQ(CoordinatorMetrics::TokensPerStep(g), 4 * 16);
  ASSERT_OK_AND_ASSIGN(Graph mlp, Graph::Build(MlpGraph()));
  EXPECT_EQ(CoordinatorMetrics::TokensPerStep(mlp), 0);
}

}  // namespace
}  // namespace meshrt
