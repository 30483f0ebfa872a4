// Checkpoints end to end: a real coordinator and four real worker processes on loopback. A small
// model trained by SGD on a 2x2 mesh saves after step 3 of 6; the checkpoint restores into a
// session on a 1-D mesh of 4 with another layout and into one on a single worker, and their steps
// 4..6 have the losses of the uninterrupted run. A corrupted shard is refused naming the file;
// names outside --checkpoint_root are refused; a worker killed during a later save leaves the
// earlier checkpoint the one that restores.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "core/train/autodiff.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;

const Shape kX({{"batch", 8}, {"d_in", 16}});
const Shape kY({{"batch", 8}, {"d_out", 8}});

// Two-layer MLP regression, SGD on w1 and w2, and a step counter.
v1::Graph TrainGraph() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", kX);
  TensorRef y = b.Placeholder("y", kY);
  Initializer init;
  init.kind = "glorot_uniform";
  init.seed = 17;
  TensorRef w1 = b.Variable("w1", Shape({{"d_in", 16}, {"hidden", 32}}), init);
  TensorRef w2 = b.Variable("w2", Shape({{"hidden", 32}, {"d_out", 8}}), init);
  TensorRef step = b.Variable("step", Shape({}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 32}})));
  TensorRef err = b.Sub(b.Einsum({h, w2}, kY), y);
  TensorRef loss = b.ReduceMean(b.Mul(err, err), {}, "loss");
  auto grads = Gradients(b, loss, {w1, w2});
  EXPECT_TRUE(grads.ok()) << grads.status();
  b.Assign(w1, b.Sub(w1, b.Scale((*grads)[0], 0.05f)), "update_w1");
  b.Assign(w2, b.Sub(w2, b.Scale((*grads)[1], 0.05f)), "update_w2");
  v1::Op one;
  one.set_type("ones");
  b.AssignAdd(step, b.Apply(one, {}, "one"), "count");
  b.MarkOutput(loss);
  return b.proto();
}

// The data of step `s` (1-based), the same on every run.
TensorMap Feeds(int s) {
  Tensor x(DType::kFloat32, kX), y(DType::kFloat32, kY);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] = std::sin(0.31f * (i + 13 * s));
  for (int64_t i = 0; i < y.num_elements(); ++i) y.f32()[i] = std::cos(0.17f * (i + 5 * s));
  return {{"x", x}, {"y", y}};
}

class CheckpointEndToEndTest : public LocalClusterTest {
 protected:
  // The committed version directory of checkpoint `name` (under the cluster's root).
  static std::string Committed(const std::string& name) {
    std::ifstream in(fs::path(checkpoint_root_) / name / "CURRENT");
    std::string version;
    in >> version;
    EXPECT_FALSE(version.empty()) << name << " has no CURRENT";
    return (fs::path(checkpoint_root_) / name / version).string();
  }
  static std::vector<std::string> Versions(const std::string& name) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(fs::path(checkpoint_root_) / name)) {
      if (e.path().filename().string().rfind("v-", 0) == 0) out.push_back(e.path().string());
    }
    return out;
  }

  std::unique_ptr<Session> Create(const std::string& mesh_text, const std::string& rules_text) {
    auto mesh = Mesh::Parse(mesh_text);
    EXPECT_TRUE(mesh.ok()) << mesh.status();
    auto rules = LayoutRules::Parse(rules_text, *mesh);
    EXPECT_TRUE(rules.ok()) << rules.status();
    auto session = client_->CreateSession(TrainGraph(), *mesh, *rules);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  // Runs step `s`; checks the step counter read at its start; returns the loss.
  static float Step(Session* session, int s) {
    auto out = session->Run(Feeds(s), {"loss", "step"});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return NAN;
    EXPECT_EQ(out->at("step").f32()[0], s - 1) << "step " << s;
    return out->at("loss").f32()[0];
  }

};


TEST_F(CheckpointEndToEndTest, TrainingResumesOnOtherMeshesWithTheSameLosses) {
  const std::string dir = "runs/step3";  // relative to the cluster's --checkpoint_root

  // The uninterrupted run, saving after step 3.
  std::vector<float> want;
  {
    std::unique_ptr<Session> a = Create("rows:2,cols:2", "batch:rows,hidden:cols");
    ASSERT_NE(a, nullptr);
    for (int s = 1; s <= 6; ++s) {
      want.push_back(Step(a.get(), s));
      if (s == 3) ASSERT_OK(a->SaveCheckpoint(dir));
    }
    ASSERT_OK(a->Close());
  }
  EXPECT_LT(want[5], want[0]);  // SGD makes progress
  const std::string version = Committed(dir);
  ASSERT_TRUE(fs::exists(fs::path(version) / "manifest.pbtxt"));
  for (const auto& e : fs::directory_iterator(version)) {
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }

  for (const auto& [mesh, rules] : std::vector<std::pair<std::string, std::string>>{
           {"x:4", "d_in:x"}, {"x:4", "hidden:x"}, {"x:1", ""}}) {
    SCOPED_TRACE(mesh + " / " + rules);
    std::unique_ptr<Session> b = Create(mesh, rules);
    ASSERT_NE(b, nullptr);
    ASSERT_OK_AND_ASSIGN(int64_t step, b->RestoreCheckpoint(dir));
    EXPECT_EQ(step, 3);
    for (int s = 4; s <= 6; ++s) {
      const float got = Step(b.get(), s);
      EXPECT_NEAR(got, want[s - 1], 1e-5 * std::abs(want[s - 1])) << "step " << s;
    }
    ASSERT_OK(b->Close());
  }
}

TEST_F(CheckpointEndToEndTest, CorruptedShardIsRefusedNamingItAndChangesNothing) {
  const std::string dir = "ckpt";
  float first;
  {
    std::unique_ptr<Session> a = Create("rows:2,cols:2", "batch:rows,hidden:cols");
    ASSERT_NE(a, nullptr);
    first = Step(a.get(), 1);
    ASSERT_OK(a->SaveCheckpoint(dir));
    ASSERT_OK(a->Close());
  }
  // w1 [d_in:16, hidden:32] split over cols: the shard of hidden 16..31.
  const std::string version = Committed(dir);
  const std::string shard = "w1.0_16.shard";
  {
    std::fstream f(fs::path(version) / shard, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekg(100);
    char c;
    f.get(c);
    f.seekp(100);
    f.put(static_cast<char>(c ^ 0x20));
  }
  std::unique_ptr<Session> b = Create("x:4", "hidden:x");
  ASSERT_NE(b, nullptr);
  absl::StatusOr<int64_t> restored = b->RestoreCheckpoint(dir);
  EXPECT_TRUE(StatusIs(restored.status(), absl::StatusCode::kDataLoss,
                       {shard, "'w1'", "corrupted", "mesh coordinate (2)",
                        "mesh coordinate (3)"}));
  // No worker installed anything: the session starts from the initializers like a fresh one.
  EXPECT_NEAR(Step(b.get(), 1), first, 1e-5 * std::abs(first));
  ASSERT_OK(b->Close());

  // A missing shard, and a checkpoint with no committed version.
  fs::remove(fs::path(version) / shard);
  std::unique_ptr<Session> c = Create("x:1", "");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(StatusIs(c->RestoreCheckpoint(dir).status(), absl::StatusCode::kNotFound,
                       {shard, "missing"}));
  fs::remove(fs::path(checkpoint_root_) / dir / "CURRENT");
  EXPECT_TRUE(StatusIs(c->RestoreCheckpoint(dir).status(), absl::StatusCode::kNotFound,
                       {"no committed checkpoint"}));
  ASSERT_OK(c->Close());
}

TEST_F(CheckpointEndToEndTest, NamesOutsideTheRootAreRefused) {
  std::unique_ptr<Session> a = Create("x:1", "");
  ASSERT_NE(a, nullptr);
  Step(a.get(), 1);
  const std::string outside = MakeTestTempDir("outside");
  for (const std::string& name : {outside + "/ck", std::string("../ck")}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(StatusIs(a->SaveCheckpoint(name), absl::StatusCode::kInvalidArgument,
                         {name, "--checkpoint_root"}));
  }
  ASSERT_EQ(symlink(outside.c_str(), (fs::path(checkpoint_root_) / "out").c_str()), 0);
  EXPECT_TRUE(StatusIs(a->SaveCheckpoint("out/ck"), absl::StatusCode::kPermissionDenied,
                       {"out", "--checkpoint_root"}));
  EXPECT_TRUE(fs::is_empty(outside));
  ASSERT_OK(a->Close());
}

TEST_F(CheckpointEndToEndTest, AWorkerKilledDuringASaveLeavesThePreviousCheckpoint) {
  const std::string dir = "killed";
  std::vector<float> want;
  std::unique_ptr<Session> a = Create("rows:2,cols:2", "batch:rows,hidden:cols");
  ASSERT_NE(a, nullptr);
  for (int s = 1; s <= 6; ++s) {
    want.push_back(Step(a.get(), s));
    if (s == 3) ASSERT_OK(a->SaveCheckpoint(dir));
  }
  const std::string v1 = Committed(dir);

  // Worker 1 (mesh coordinate (0,1), which owns the hidden 16..31 slices) hangs, the save starts,
  // worker 0 writes its shards into the new version, then worker 1 is killed.
  const pid_t victim = cluster_->worker_pid(1);
  ASSERT_EQ(kill(victim, SIGSTOP), 0);
  absl::Status saved;
  std::thread save([&] { saved = a->SaveCheckpoint(dir); });
  bool written = false;
  for (int i = 0; i < 1000 && !written; ++i) {
    for (const std::string& v : Versions(dir)) {
      written |= v != v1 && fs::exists(fs::path(v) / "w1.0_0.shard");
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_TRUE(written) << "worker 0 never wrote its shard of the second save";
  ASSERT_OK(cluster_->KillWorker(1));
  save.join();
  EXPECT_FALSE(saved.ok());
  std::cerr << "save with a worker killed: " << saved << "\n";
  EXPECT_EQ(Committed(dir), v1);
  EXPECT_EQ(Versions(dir), std::vector<std::string>{v1});  // the half-written one was removed
  a.reset();
  // Once the coordinator has dropped the dead worker, a replacement joins.
  for (int i = 0; i < 200; ++i) {
    auto list = client_->ListWorkers();
    if (list.ok() && list->workers_size() == 3) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_OK(cluster_->AddWorker(4));

  // The first checkpoint restores, and steps 4..6 have the losses of the first run.
  std::unique_ptr<Session> b = Create("x:4", "hidden:x");
  ASSERT_NE(b, nullptr);
  ASSERT_OK_AND_ASSIGN(int64_t step, b->RestoreCheckpoint(dir));
  EXPECT_EQ(step, 3);
  for (int s = 4; s <= 6; ++s) {
    EXPECT_NEAR(Step(b.get(), s), want[s - 1], 1e-5 * std::abs(want[s - 1])) << "step " << s;
  }
  ASSERT_OK(b->Close());
}

}  // namespace
}  // namespace meshrt
