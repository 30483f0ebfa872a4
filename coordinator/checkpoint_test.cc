// Checkpoints through the coordinator with workers in this process: a session trained on a 2x2
// mesh saves, a session on another mesh and layout restores and continues with the same losses;
// bad directories, other variables, corrupted shards and broken workers are refused with errors
// naming them, and a refused restore changes no variable.
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "coordinator/coordinator.h"
#include "coordinator/in_process_workers.h"
#include "core/autodiff.h"
#include "core/builder.h"
#include "core/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;

std::string MakeTempDir() { return MakeTestTempDir("ckpt"); }

const Shape kX({{"batch", 8}, {"d_in", 16}});
const Shape kY({{"batch", 8}, {"d_out", 4}});

// Two-layer regression trained by SGD, with a step counter.
v1::Graph TrainGraph(bool with_w2 = true) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", kX);
  TensorRef y = b.Placeholder("y", kY);
  Initializer init;
  init.kind = "glorot_uniform";
  init.seed = 5;
  TensorRef w1 = b.Variable("w1", Shape({{"d_in", 16}, {"hidden", 8}}), init);
  TensorRef w2 = with_w2 ? b.Variable("w2", Shape({{"hidden", 8}, {"d_out", 4}}), init)
                         : b.Variable("w3", Shape({{"hidden", 8}, {"d_out", 4}}), init);
  TensorRef step = b.Variable("step", Shape({}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 8}})));
  TensorRef err = b.Sub(b.Einsum({h, w2}, kY), y);
  TensorRef loss = b.ReduceMean(b.Mul(err, err), {}, "loss");
  auto grads = Gradients(b, loss, {w1, w2});
  EXPECT_TRUE(grads.ok()) << grads.status();
  b.Assign(w1, b.Sub(w1, b.Scale((*grads)[0], 0.1f)), "update_w1");
  b.Assign(w2, b.Sub(w2, b.Scale((*grads)[1], 0.1f)), "update_w2");
  v1::Op one;
  one.set_type("ones");
  b.AssignAdd(step, b.Apply(one, {}, "one"), "count");
  b.MarkOutput(loss);
  return b.proto();
}

TensorMap Feeds(int step) {
  Tensor x(DType::kFloat32, kX), y(DType::kFloat32, kY);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] = std::sin(0.37f * (i + 11 * step));
  for (int64_t i = 0; i < y.num_elements(); ++i) y.f32()[i] = std::cos(0.23f * (i + 7 * step));
  return {{"x", x}, {"y", y}};
}

class CheckpointCoordinatorTest : public ::testing::Test {
 protected:
  CheckpointCoordinatorTest() : coordinator_(Options(), &workers_) {}

  static CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    return o;
  }

  void Register(int n) {
    for (int i = 0; i < n; ++i) {
      std::string address = absl::StrCat("w", next_++);
      workers_.AddWorker(address);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("inc-" + address);
      r.set_secret("secret-of-" + address + "-0123456789");
      ASSERT_TRUE(coordinator_.RegisterWorker(r).ok());
    }
  }

  std::string Create(const std::string& mesh_text, const std::string& rules_text,
                     const v1::Graph& graph = TrainGraph()) {
    v1::CreateSessionRequest r;
    *r.mutable_graph() = graph;
    Mesh m = Mesh::Parse(mesh_text).value();
    *r.mutable_mesh() = m.ToProto();
    *r.mutable_rules() = LayoutRules::Parse(rules_text, m).value().ToProto();
    r.set_timeout_ms(2000);
    auto s = coordinator_.CreateSession(r);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->session() : "";
  }

  float Step(const std::string& session, int step) {
    auto out = coordinator_.RunStep(session, Feeds(step), {"loss", "step"});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return NAN;
    EXPECT_EQ(out->at("step").f32()[0], step - 1);  // read at the start of the step
    return out->at("loss").f32()[0];
  }

  InProcessWorkers workers_;
  Coordinator coordinator_;
  int next_ = 0;
};

TEST_F(CheckpointCoordinatorTest, SavedOnTwoByTwoContinuesOnOtherMeshes) {
  Register(4);
  const std::string dir = MakeTempDir() + "/ckpt";  // SaveCheckpoint creates it
  std::vector<float> want;
  const std::string a = Create("rows:2,cols:2", "batch:rows,hidden:cols");
  for (int s = 1; s <= 4; ++s) {
    want.push_back(Step(a, s));
    if (s == 2) {
      ASSERT_OK_AND_ASSIGN(v1::SaveCheckpointResponse saved, coordinator_.SaveCheckpoint(a, dir));
      EXPECT_EQ(saved.step(), 2);
      EXPECT_EQ(saved.num_shards(), 2 + 2 + 1);  // w1, w2 split over cols; step
      EXPECT_EQ(saved.num_bytes(), (16 * 8 + 8 * 4 + 1) * 4);
    }
  }
  ASSERT_OK(coordinator_.CloseSession(a));

  for (const auto& [mesh, rules] : std::vector<std::pair<std::string, std::string>>{
           {"x:4", "d_in:x"}, {"x:1", ""}, {"x:2", "batch:x"}, {"x:2", "d_out:x"}}) {
    SCOPED_TRACE(mesh + " / " + rules);
    const std::string b = Create(mesh, rules);
    ASSERT_OK_AND_ASSIGN(v1::RestoreCheckpointResponse restored,
                         coordinator_.RestoreCheckpoint(b, dir));
    EXPECT_EQ(restored.step(), 2);
    for (int s = 3; s <= 4; ++s) {
      EXPECT_NEAR(Step(b, s), want[s - 1], 1e-5 * std::abs(want[s - 1])) << "step " << s;
    }
    ASSERT_OK(coordinator_.CloseSession(b));
  }
}

TEST_F(CheckpointCoordinatorTest, BadRestoresAreRefusedAndChangeNothing) {
  Register(4);
  const std::string dir = MakeTempDir();
  const std::string a = Create("x:4", "hidden:x");
  // Nothing to save before the first step.
  EXPECT_TRUE(StatusIs(coordinator_.SaveCheckpoint(a, dir).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"worker 0 (w0, mesh coordinate (0))", "no value yet"}));
  const float first = Step(a, 1);
  EXPECT_TRUE(StatusIs(coordinator_.SaveCheckpoint(a, "relative/dir").status(),
                       absl::StatusCode::kInvalidArgument, {"absolute"}));
  ASSERT_TRUE(coordinator_.SaveCheckpoint(a, dir).ok());
  ASSERT_OK(coordinator_.CloseSession(a));

  // A session on other variables: refused before dispatch, naming them.
  const std::string other = Create("x:4", "", TrainGraph(/*with_w2=*/false));
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(other, dir).status(),
                       absl::StatusCode::kInvalidArgument, {"'w3'", "'w2'"}));
  ASSERT_OK(coordinator_.CloseSession(other));

  const std::string b = Create("rows:2,cols:2", "hidden:cols");
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, MakeTempDir()).status(),
                       absl::StatusCode::kNotFound, {"manifest.pbtxt", "incomplete"}));
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint("nope", dir).status(),
                       absl::StatusCode::kNotFound));
  // Corrupt the shard of w1 holding hidden 2-3 (x:4, hidden:x): under hidden:cols the workers at
  // cols=0 need it.
  {
    std::fstream f(fs::path(dir) / "w1.0_2.shard", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('\x7f');
  }
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, dir).status(), absl::StatusCode::kDataLoss,
                       {"w1.0_2.shard", "'w1'", "mesh coordinate (0,0)",
                        "mesh coordinate (1,0)"}));
  // Nothing changed on any worker: the next step initialises the variables as on a fresh session.
  EXPECT_NEAR(Step(b, 1), first, 1e-5 * std::abs(first));
  ASSERT_OK(coordinator_.CloseSession(b));

  // A worker that is gone: named, and the others keep nothing.
  const std::string c = Create("x:4", "hidden:x");
  workers_.Break("w3", absl::UnavailableError("connection refused"));
  fs::remove(fs::path(dir) / "w1.0_2.shard");
  auto restored = coordinator_.RestoreCheckpoint(c, dir);
  EXPECT_FALSE(restored.ok());
  EXPECT_TRUE(StatusIs(restored.status(), absl::StatusCode::kNotFound, {"w1.0_2.shard", "missing"}))
      << restored.status();
  EXPECT_TRUE(absl::StrContains(restored.status().message(), "worker 3 (w3")) << restored.status();
}

}  // namespace
}  // namespace meshrt
