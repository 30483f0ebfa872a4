// Long runs survive failures (client/training_run.h), with real daemons: a worker killed with a
// spare registered, killed with none (a smaller mesh, then growing back), the coordinator killed
// and restarted. Every run must give the uninterrupted run's loss at every step: bitwise on the
// same mesh, within 1e-5 relative on another.
#include "client/training_run.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/local_cluster.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "models/train.h"

namespace meshrt {
namespace {

constexpr int64_t kSteps = 30;
constexpr int64_t kSaveEvery = 5;
constexpr char kMesh[] = "rows:2,cols:2";
constexpr char kRules[] = "batch:rows,d_ff:cols";

v1::Graph TrainGraph() {
  models::MlpOptions m;
  m.batch = 16;
  m.d_model = 16;
  m.d_ff = 32;
  TrainOptions t;
  t.optimizer = "adam";  // optimizer slots and the step counter must come back too
  t.learning_rate.base = 0.01f;
  absl::StatusOr<models::TrainGraph> g = models::BuildMlpTrainGraph(m, t);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? g->graph.proto() : v1::Graph();
}

std::unique_ptr<LocalCluster> StartCluster(int workers, const std::string& checkpoint_root) {
  LocalClusterOptions o;
  o.workers = workers;
  o.coordinator_command = {"coordinator/meshrt-coordinator"};
  o.worker_command = {"worker/meshrt-worker"};
  o.coordinator_flags = {"--heartbeat_interval_ms=200", "--heartbeat_timeout_ms=2000",
                         "--collective_timeout_ms=5000"};
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) o.log_dir = dir;
  o.checkpoint_root = checkpoint_root;
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(o);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

struct Trained {
  std::map<int64_t, float> loss;  // by step (a redone step: its last value)
  std::vector<std::string> events;
  std::unique_ptr<TrainingRun> run;
};

// Trains one step per request to kSteps, calling `at(step)` after each step.
Trained Train(const LocalCluster& cluster, const std::string& checkpoint,
              const std::function<void(int64_t)>& at,
              absl::Duration replace_wait = absl::Seconds(10)) {
  Trained t;
  std::vector<std::string>* events = &t.events;
  TrainingRunOptions o;
  o.client = cluster.client_options();
  o.graph = TrainGraph();
  o.mesh = *Mesh::Parse(kMesh);
  o.rules = *LayoutRules::Parse(kRules, o.mesh);
  o.checkpoint = checkpoint;
  o.save_every = kSaveEvery;
  o.resume = true;
  o.replace_wait = replace_wait;
  auto shared = std::make_shared<std::vector<std::string>>();
  o.log = [shared](const std::string& line) { shared->push_back(line); };
  absl::StatusOr<std::unique_ptr<TrainingRun>> run = TrainingRun::Start(o);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return t;
  while ((*run)->step() < kSteps) {
    absl::StatusOr<TensorMap> out = (*run)->Steps(1, {"loss"});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) break;
    t.loss[(*run)->step()] = out->at("loss").f32()[0];
    at((*run)->step());
  }
  EXPECT_TRUE((*run)->Save().ok());
  *events = *shared;
  t.run = *std::move(run);
  std::cout << "events:\n" << absl::StrJoin(t.events, "\n") << "\n";  // the test log's record
  return t;
}

std::string Events(const Trained& t) { return absl::StrJoin(t.events, "\n"); }

class RecoveryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string root = MakeTestTempDir("baseline");
    std::unique_ptr<LocalCluster> cluster = StartCluster(4, root);
    ASSERT_NE(cluster, nullptr);
    baseline_ = new Trained(Train(*cluster, "ck", [](int64_t) {}));
    baseline_->run.reset();  // closes its session while the cluster is up
    ASSERT_EQ(baseline_->loss.size(), static_cast<size_t>(kSteps));
  }
  static void TearDownTestSuite() { delete baseline_; }

  // Every step's loss equals the uninterrupted run's, within `rel` (0: exactly).
  static void ExpectBaselineCurve(const Trained& got, double rel) {
    ASSERT_EQ(got.loss.size(), static_cast<size_t>(kSteps)) << Events(got);
    for (const auto& [step, want] : baseline_->loss) {
      const float l = got.loss.at(step);
      if (rel == 0) {
        EXPECT_EQ(l, want) << "step " << step << "\n" << Events(got);
      } else {
        EXPECT_NEAR(l, want, rel * std::abs(want)) << "step " << step << "\n" << Events(got);
      }
    }
  }

  static inline Trained* baseline_ = nullptr;
};

TEST_F(RecoveryTest, AKilledWorkerIsReplacedByASpareAndTheCurveIsUnchanged) {
  std::unique_ptr<LocalCluster> cluster = StartCluster(5, MakeTestTempDir("spare"));
  ASSERT_NE(cluster, nullptr);
  const Trained got = Train(*cluster, "ck", [&](int64_t step) {
    if (step == 12 && cluster->worker_pid(1) > 0) {
      ASSERT_TRUE(cluster->KillWorker(1).ok());
    }
  });
  TrainingRun* run = got.run.get();
  ASSERT_NE(run, nullptr);
  ExpectBaselineCurve(got, 0);
  ASSERT_EQ(run->recoveries().size(), 1u) << Events(got);
  const Recovery& r = run->recoveries()[0];
  EXPECT_EQ(r.failed_at, 12);
  EXPECT_EQ(r.resumed_at, 10);
  EXPECT_EQ(r.mesh, kMesh);
  EXPECT_TRUE(absl::StrContains(Events(got), "recovered in")) << Events(got);
  EXPECT_TRUE(absl::StrContains(r.cause, "worker")) << r.cause;
}

TEST_F(RecoveryTest, WithNoSpareItShrinksThenGrowsBackAtACheckpoint) {
  std::unique_ptr<LocalCluster> cluster = StartCluster(4, MakeTestTempDir("shrink"));
  ASSERT_NE(cluster, nullptr);
  bool added = false;
  const Trained got = Train(
      *cluster, "ck",
      [&](int64_t step) {
        if (step == 12 && cluster->worker_pid(1) > 0) {
      ASSERT_TRUE(cluster->KillWorker(1).ok());
    }
        if (step == 16 && !added) {  // after the recovery: the run is on the smaller mesh
          added = true;
          ASSERT_TRUE(cluster->AddWorker(4).ok());
        }
      },
      /*replace_wait=*/absl::Seconds(1));
  TrainingRun* run = got.run.get();
  ASSERT_NE(run, nullptr);
  ExpectBaselineCurve(got, 1e-5);
  ASSERT_EQ(run->recoveries().size(), 1u) << Events(got);
  const Recovery& r = run->recoveries()[0];
  EXPECT_EQ(r.resumed_at, 10);
  EXPECT_TRUE(r.mesh == "rows:1,cols:2" || r.mesh == "rows:2,cols:1") << r.mesh;
  EXPECT_TRUE(absl::StrContains(Events(got), "grew back to mesh rows:2,cols:2")) << Events(got);
  EXPECT_EQ(run->mesh().ToString(), kMesh);
}

TEST_F(RecoveryTest, TheClientResumesAfterACoordinatorRestart) {
  std::unique_ptr<LocalCluster> cluster = StartCluster(4, MakeTestTempDir("restart"));
  ASSERT_NE(cluster, nullptr);
  bool restarted = false;
  const Trained got = Train(*cluster, "ck", [&](int64_t step) {
    if (step == 13 && !restarted) {
      restarted = true;
      ASSERT_TRUE(cluster->RestartCoordinator(absl::Seconds(1)).ok());
    }
  });
  TrainingRun* run = got.run.get();
  ASSERT_NE(run, nullptr);
  ExpectBaselineCurve(got, 0);
  ASSERT_EQ(run->recoveries().size(), 1u) << Events(got);
  EXPECT_EQ(run->recoveries()[0].resumed_at, 10);
  EXPECT_EQ(run->recoveries()[0].mesh, kMesh);
}

TEST(ChooseSmallerMeshTest, KeepsTheDimsAndTheMostProcessorsTheRulesAllow) {
  absl::StatusOr<Graph> graph = Graph::Build(TrainGraph());
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Mesh mesh = *Mesh::Parse(kMesh);
  const LayoutRules rules = *LayoutRules::Parse(kRules, mesh);
  for (int free : {4, 3, 2, 1}) {
    absl::StatusOr<Mesh> m = ChooseSmallerMesh(*graph, mesh, rules, free);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->num_processors(), free == 3 ? 2 : free) << m->ToString();
    EXPECT_EQ(m->ndims(), 2);
    EXPECT_EQ(m->dims()[0].name, "rows");
  }
  EXPECT_EQ(ChooseSmallerMesh(*graph, mesh, rules, 4)->ToString(), kMesh);
  EXPECT_TRUE(StatusIs(ChooseSmallerMesh(*graph, mesh, rules, 0).status(),
                       absl::StatusCode::kNotFound, {"rows:2,cols:2", "0 free"}));
  // A 3-way split of batch 16 is not valid: with rows:4 requested and 3 free, rows:2.
  const Mesh rows4 = *Mesh::Parse("rows:4");
  absl::StatusOr<Mesh> m =
      ChooseSmallerMesh(*graph, rows4, *LayoutRules::Parse("batch:rows", rows4), 3);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->ToString(), "rows:2");
}

TEST(IsRecoverableTest, LostWorkersYesBadRequestsNo) {
  EXPECT_TRUE(IsRecoverable(absl::UnavailableError("worker 2 died")));
  EXPECT_TRUE(IsRecoverable(absl::DeadlineExceededError("collective timed out")));
  EXPECT_TRUE(IsRecoverable(absl::NotFoundError("no session 's-1'")));
  EXPECT_TRUE(IsRecoverable(absl::FailedPreconditionError("session s-1 has failed and must be")));
  EXPECT_FALSE(IsRecoverable(absl::FailedPreconditionError("checkpoints are disabled")));
  EXPECT_FALSE(IsRecoverable(absl::InvalidArgumentError("bad layout")));
  EXPECT_FALSE(IsRecoverable(absl::PermissionDeniedError("not yours")));
  EXPECT_FALSE(IsRecoverable(absl::DataLossError("no version is intact")));
}

}  // namespace
}  // namespace meshrt
