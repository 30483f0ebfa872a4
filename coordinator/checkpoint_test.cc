// Checkpoints through the coordinator with workers in this process: a session trained on a 2x2
// mesh saves, a session on another mesh and layout restores and continues with the same losses;
// bad names, other variables, corrupted shards and manifests and broken workers are refused with
// errors naming them, and a refused restore changes no variable. A save that fails or dies before
// its commit leaves the previous checkpoint the one restored. Names stay under --checkpoint_root.
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "coordinator/checkpoint_test_fixture.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "core/train/autodiff.h"
#include "core/train/optimizers.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;
using checkpoint_testing::CheckpointCoordinatorTest;
using checkpoint_testing::Feeds;
using checkpoint_testing::MicrobatchTrainGraph;
using checkpoint_testing::RealTempDir;
using checkpoint_testing::TrainGraph;

TEST_F(CheckpointCoordinatorTest, SavedOnTwoByTwoContinuesOnOtherMeshes) {
  Register(4);
  const std::string dir = "runs/ckpt";  // relative to the root; SaveCheckpoint creates it
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

// Saved mid-cycle (2 of 4 microbatches accumulated) where the accumulators are partial sums over
// rows, restored onto meshes where they are partial over another group or not partial at all: the
// same losses as the run without the save, through the next update and the one after.
TEST_F(CheckpointCoordinatorTest, MicrobatchAccumulatorsSavedMidCycleContinueOnOtherMeshes) {
  Register(4);
  const std::string dir = "micro";
  auto step = [&](const std::string& session, int s) {
    auto out = coordinator_.RunStep(session, Feeds(s), {"loss"});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->at("loss").f32()[0] : NAN;
  };
  std::vector<float> want;
  const std::string a = Create("rows:2,cols:2", "batch:rows,hidden:cols", MicrobatchTrainGraph());
  for (int s = 1; s <= 10; ++s) {
    want.push_back(step(a, s));
    if (s == 6) {
      ASSERT_OK_AND_ASSIGN(v1::SaveCheckpointResponse saved, coordinator_.SaveCheckpoint(a, dir));
      EXPECT_EQ(saved.step(), 6);
      // w1, w2 split over cols; their accumulators as 2 addends (rows) of those 2 slices each;
      // global_step and micro_step.
      EXPECT_EQ(saved.num_shards(), 2 + 2 + 4 + 4 + 2);
      EXPECT_EQ(saved.num_bytes(), (3 * (16 * 8 + 8 * 4) + 2) * 4);
    }
  }
  ASSERT_OK(coordinator_.CloseSession(a));
  for (const auto& [mesh, rules] : std::vector<std::pair<std::string, std::string>>{
           {"x:4", "batch:x"}, {"x:2", "hidden:x"}, {"x:1", ""}, {"x:2,y:2", "batch:y"}}) {
    SCOPED_TRACE(mesh + " / " + rules);
    const std::string b = Create(mesh, rules, MicrobatchTrainGraph());
    ASSERT_OK_AND_ASSIGN(v1::RestoreCheckpointResponse restored,
                         coordinator_.RestoreCheckpoint(b, dir));
    EXPECT_EQ(restored.step(), 6);
    for (int s = 7; s <= 10; ++s) {
      EXPECT_NEAR(step(b, s), want[s - 1], 1e-5 * std::abs(want[s - 1])) << "step " << s;
    }
    ASSERT_OK(coordinator_.CloseSession(b));
  }
}

TEST_F(CheckpointCoordinatorTest, BadRestoresAreRefusedAndChangeNothing) {
  Register(4);
  const std::string dir = "ck";
  const std::string a = Create("x:4", "hidden:x");
  // Nothing to save before the first step.
  EXPECT_TRUE(StatusIs(coordinator_.SaveCheckpoint(a, dir).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"worker 0 (w0, mesh coordinate (0))", "no value yet"}));
  const float first = Step(a, 1);
  ASSERT_TRUE(coordinator_.SaveCheckpoint(a, dir).ok());
  ASSERT_OK(coordinator_.CloseSession(a));

  // A session on other variables: refused before dispatch, naming them.
  const std::string other = Create("x:4", "", TrainGraph(/*with_w2=*/false));
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(other, dir).status(),
                       absl::StatusCode::kInvalidArgument, {"'w3'", "'w2'"}));
  ASSERT_OK(coordinator_.CloseSession(other));

  const std::string b = Create("rows:2,cols:2", "hidden:cols");
  fs::create_directories(fs::path(root_) / "empty");
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, "empty").status(),
                       absl::StatusCode::kNotFound, {"no committed checkpoint", "CURRENT"}));
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, "absent").status(),
                       absl::StatusCode::kNotFound, {"no checkpoint 'absent'"}));
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint("nope", dir).status(),
                       absl::StatusCode::kNotFound));
  // Corrupt the shard of w1 holding hidden 2-3 (x:4, hidden:x): under hidden:cols the workers at
  // cols=0 need it.
  const std::string version = Committed(dir);
  {
    std::fstream f(fs::path(version) / "w1.0_2.shard",
                   std::ios::in | std::ios::out | std::ios::binary);
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
  fs::remove(fs::path(version) / "w1.0_2.shard");
  auto restored = coordinator_.RestoreCheckpoint(c, dir);
  EXPECT_FALSE(restored.ok());
  EXPECT_TRUE(StatusIs(restored.status(), absl::StatusCode::kNotFound, {"w1.0_2.shard", "missing"}))
      << restored.status();
  EXPECT_TRUE(absl::StrContains(restored.status().message(), "worker 3 (w3")) << restored.status();
}

TEST_F(CheckpointCoordinatorTest, NamesStayUnderTheCheckpointRoot) {
  Register(1);
  const std::string a = Create("x:1", "");
  Step(a, 1);
  const std::string outside = RealTempDir();
  for (const std::string& name : {outside + "/ck", std::string("../ck"), std::string("a/../../ck"),
                                  std::string("")}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(StatusIs(coordinator_.SaveCheckpoint(a, name).status(),
                         absl::StatusCode::kInvalidArgument,
                         {"'" + name + "'", "--checkpoint_root"}));
    EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(a, name).status(),
                         absl::StatusCode::kInvalidArgument,
                         {"'" + name + "'", "--checkpoint_root"}));
  }
  ASSERT_EQ(symlink(outside.c_str(), (fs::path(root_) / "link").c_str()), 0);
  EXPECT_TRUE(StatusIs(coordinator_.SaveCheckpoint(a, "link/ck").status(),
                       absl::StatusCode::kPermissionDenied,
                       {"link", "resolves to '" + outside + "'", "--checkpoint_root"}));
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(a, "link").status(),
                       absl::StatusCode::kPermissionDenied, {"link", "--checkpoint_root"}));
  EXPECT_TRUE(fs::is_empty(outside));  // nothing was created out there

  // A coordinator without --checkpoint_root refuses checkpoints, naming the flag.
  Coordinator no_root(CoordinatorOptions(), &workers_);
  EXPECT_TRUE(StatusIs(no_root.SaveCheckpoint(a, "ck").status(),
                       absl::StatusCode::kFailedPrecondition, {"--checkpoint_root"}));
  EXPECT_TRUE(StatusIs(no_root.RestoreCheckpoint(a, "ck").status(),
                       absl::StatusCode::kFailedPrecondition, {"--checkpoint_root"}));
}

TEST_F(CheckpointCoordinatorTest, WorkersCheckTheDirectoryIsUnderTheirOwnRoot) {
  // A worker whose --checkpoint_root is another directory refuses what the coordinator sends.
  const std::string elsewhere = RealTempDir();
  ASSERT_OK_AND_ASSIGN(const FileAccessPolicy policy,
                       FileAccessPolicy::Under({elsewhere}, "--checkpoint_root"));
  WorkerFileAccess files;
  files.checkpoints = &policy;
  Register(1, files);
  const std::string a = Create("x:1", "");
  Step(a, 1);
  const absl::Status saved = coordinator_.SaveCheckpoint(a, "ck").status();
  EXPECT_TRUE(StatusIs(saved, absl::StatusCode::kPermissionDenied,
                       {"worker 0", root_ + "/ck/v-", "--checkpoint_root", elsewhere}));
  // The failed save left no version behind.
  EXPECT_TRUE(Versions("ck").empty());
  EXPECT_FALSE(fs::exists(fs::path(root_) / "ck" / "CURRENT"));
  ASSERT_OK(coordinator_.CloseSession(a));
}

TEST_F(CheckpointCoordinatorTest, AFailedSaveLeavesThePreviousCheckpoint) {
  Register(4);
  const std::string a = Create("rows:2,cols:2", "batch:rows,hidden:cols");
  std::vector<float> want;
  for (int s = 1; s <= 2; ++s) want.push_back(Step(a, s));
  ASSERT_OK(coordinator_.SaveCheckpoint(a, "ck").status());  // v1: after step 2
  const std::string v1 = Committed("ck");
  for (int s = 3; s <= 4; ++s) want.push_back(Step(a, s));

  // A disk error on one worker after the others wrote their shards.
  workers_.FailNextSave("w2", absl::ResourceExhaustedError("No space left on device"));
  EXPECT_TRUE(StatusIs(coordinator_.SaveCheckpoint(a, "ck").status(),
                       absl::StatusCode::kResourceExhausted,
                       {"worker 2 (w2", "No space left on device"}));
  EXPECT_EQ(Committed("ck"), v1);
  EXPECT_EQ(Versions("ck"), std::vector<std::string>{v1});  // the new version's files are gone
  // A worker that is gone during the save.
  workers_.Break("w3", absl::UnavailableError("connection reset"));
  EXPECT_TRUE(StatusIs(coordinator_.SaveCheckpoint(a, "ck").status(),
                       absl::StatusCode::kUnavailable, {"worker 3 (w3"}));
  EXPECT_EQ(Committed("ck"), v1);
  workers_.Break("w3", absl::OkStatus());
  ASSERT_OK(coordinator_.CloseSession(a));

  // v1 restores with v1's values: steps 3 and 4 give the losses of the first run.
  const std::string b = Create("x:4", "d_in:x");
  ASSERT_OK_AND_ASSIGN(v1::RestoreCheckpointResponse restored,
                       coordinator_.RestoreCheckpoint(b, "ck"));
  EXPECT_EQ(restored.step(), 2);
  for (int s = 3; s <= 4; ++s) {
    EXPECT_NEAR(Step(b, s), want[s - 1], 1e-5 * std::abs(want[s - 1])) << "step " << s;
  }
  ASSERT_OK(coordinator_.CloseSession(b));
}

TEST_F(CheckpointCoordinatorTest, ASaveInterruptedBeforeItsCommitIsIgnoredThenCleanedUp) {
  Register(3);
  const std::string a = Create("x:2", "hidden:x");
  Step(a, 1);
  ASSERT_OK(coordinator_.SaveCheckpoint(a, "ck").status());  // after step 1
  const std::string v1 = Committed("ck");
  // What a coordinator killed half way leaves: a version with shards and even a manifest (of a
  // later step), never named by CURRENT.
  const std::string dead = (fs::path(root_) / "ck" / "v-0000000009-0123456789abcdef").string();
  fs::copy(v1, dead);
  {
    std::fstream f(fs::path(dead) / "w1.0_0.shard", std::ios::in | std::ios::out | std::ios::binary);
    f.put('\x55');
  }
  const std::string c = Create("x:1", "");
  ASSERT_OK_AND_ASSIGN(v1::RestoreCheckpointResponse restored,
                       coordinator_.RestoreCheckpoint(c, "ck"));
  EXPECT_EQ(restored.step(), 1);
  ASSERT_OK(coordinator_.CloseSession(c));

  // The next save commits beside v1, keeps v1 as the previous version and removes the dead one.
  Step(a, 2);
  ASSERT_OK(coordinator_.SaveCheckpoint(a, "ck").status());
  const std::string v2 = Committed("ck");
  EXPECT_NE(v2, v1);
  EXPECT_FALSE(fs::exists(dead));
  std::vector<std::string> versions = Versions("ck");
  std::sort(versions.begin(), versions.end());
  std::vector<std::string> want = {v1, v2};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(versions, want);
  ASSERT_OK(coordinator_.CloseSession(a));
}

// The bytes of every shard file of version directory `version` flipped at one offset.
void DamageShards(const std::string& version) {
  for (const auto& e : fs::directory_iterator(version)) {
    if (e.path().extension() != ".shard") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('\x55');
  }
}

TEST_F(CheckpointCoordinatorTest, ADamagedNewestVersionFallsBackToTheOlderOnesKept) {
  Register(2);
  const std::string a = Create("x:2", "hidden:x");
  std::vector<float> want;
  want.push_back(Step(a, 1));
  ASSERT_OK(coordinator_.SaveCheckpoint(a, "ck", /*keep=*/3).status());  // after step 1
  const std::string v1 = Committed("ck");
  want.push_back(Step(a, 2));
  ASSERT_OK(coordinator_.SaveCheckpoint(a, "ck", /*keep=*/3).status());  // after step 2
  const std::string v2 = Committed("ck");
  want.push_back(Step(a, 3));
  EXPECT_TRUE(StatusIs(coordinator_.SaveCheckpoint(a, "ck", /*keep=*/0).status(),
                       absl::StatusCode::kInvalidArgument, {"keep 0"}));
  ASSERT_OK(coordinator_.CloseSession(a));

  // The newest version's shards are damaged: the restore takes v1 and step 2 is redone exactly.
  DamageShards(v2);
  const std::string b = Create("x:1", "");
  ASSERT_OK_AND_ASSIGN(v1::RestoreCheckpointResponse restored,
                       coordinator_.RestoreCheckpoint(b, "ck"));
  EXPECT_EQ(restored.step(), 1);
  for (int s = 2; s <= 3; ++s) {
    EXPECT_NEAR(Step(b, s), want[s - 1], 1e-5 * std::abs(want[s - 1])) << "step " << s;
  }
  // Both damaged: DataLoss that says no version is intact.
  DamageShards(v1);
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, "ck").status(),
                       absl::StatusCode::kDataLoss, {"no version of it is intact"}));
  ASSERT_OK(coordinator_.CloseSession(b));
}

TEST_F(CheckpointCoordinatorTest, ACorruptedManifestIsDataLoss) {
  Register(1);
  const std::string a = Create("x:1", "");
  Step(a, 1);
  Step(a, 2);
  ASSERT_OK(coordinator_.SaveCheckpoint(a, "ck").status());
  const std::string manifest = Committed("ck") + "/manifest.pbtxt";
  std::string text;
  {
    std::ifstream in(manifest);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = text.find("step: 2\n");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 8, "step: 5\n");  // still a consistent manifest: only the checksum tells
  std::ofstream(manifest, std::ios::trunc) << text;
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(a, "ck").status(),
                       absl::StatusCode::kDataLoss, {manifest, "checksum"}));
  ASSERT_OK(coordinator_.CloseSession(a));
}

}  // namespace
}  // namespace meshrt
