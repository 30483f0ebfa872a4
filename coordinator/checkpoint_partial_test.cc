// Checkpoints as whole tensors (runtime/checkpoint_tensors.h) against real distributed sessions:
// a checkpoint saved on a 2x2 mesh reads back whole as the values the session fetches, and
// tensors written as a checkpoint restore partially (RestoreCheckpointRequest.partial) onto a
// 2-worker mesh in another layout, setting the variables they hold and leaving the others.
#include <cstring>
#include <string>

#include "coordinator/checkpoint_test_fixture.h"
#include "runtime/checkpoint_store.h"
#include "runtime/checkpoint_tensors.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;
using checkpoint_testing::CheckpointCoordinatorTest;
using checkpoint_testing::Feeds;

void ExpectBitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.num_elements(), want.num_elements()) << what;
  EXPECT_EQ(std::memcmp(got.f32(), want.f32(), got.num_elements() * 4), 0) << what;
}

// The variables' values at the start of the next step (fetching runs step `next`).
TensorMap Fetch(Coordinator& c, const std::string& session, int next) {
  auto out = c.RunStep(session, Feeds(next), {"w1", "w2", "step"});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : TensorMap();
}

TEST_F(CheckpointCoordinatorTest, ASavedCheckpointReadsWholeAsTheFetchedValues) {
  Register(4);
  const std::string a = Create("rows:2,cols:2", "batch:rows,hidden:cols");
  Step(a, 1);
  Step(a, 2);
  ASSERT_OK(coordinator_.SaveCheckpoint(a, "ck").status());
  const TensorMap fetched = Fetch(coordinator_, a, 3);
  ASSERT_OK_AND_ASSIGN(CheckpointTensors read,
                       ReadCheckpointTensors((fs::path(root_) / "ck").string()));
  EXPECT_EQ(read.step, 2);
  ASSERT_EQ(read.tensors.size(), 3u);
  for (const char* name : {"w1", "w2", "step"}) ExpectBitwise(read.tensors.at(name), fetched.at(name), name);
  EXPECT_EQ(read.tensors.at("step").f32()[0], 2);
}

// Microbatch accumulators saved mid-cycle as 2 addends each (partial sums over rows): read whole,
// they are the sums, as a one-processor session restored from the checkpoint fetches them.
TEST_F(CheckpointCoordinatorTest, AddendsReadWholeAreTheirSums) {
  Register(4);
  const std::string a =
      Create("rows:2,cols:2", "batch:rows,hidden:cols", checkpoint_testing::MicrobatchTrainGraph());
  for (int s = 1; s <= 6; ++s) ASSERT_TRUE(coordinator_.RunStep(a, Feeds(s), {"loss"}).ok());
  ASSERT_OK(coordinator_.SaveCheckpoint(a, "micro").status());
  ASSERT_OK(coordinator_.CloseSession(a));
  const std::string dir = (fs::path(root_) / "micro").string();
  ASSERT_OK_AND_ASSIGN(CommittedCheckpoint committed, ReadCommittedCheckpoint(dir));
  int with_addends = 0;
  for (const v1::CheckpointVariable& v : committed.manifest.variables()) {
    with_addends += v.addends() == 2;
  }
  ASSERT_EQ(with_addends, 2);  // w1/acc, w2/acc
  ASSERT_OK_AND_ASSIGN(CheckpointTensors read, ReadCheckpointTensors(dir));
  const std::string one = Create("x:1", "", checkpoint_testing::MicrobatchTrainGraph());
  ASSERT_OK(coordinator_.RestoreCheckpoint(one, "micro").status());
  std::vector<std::string> names;
  for (const auto& [name, t] : read.tensors) names.push_back(name);
  ASSERT_OK_AND_ASSIGN(TensorMap fetched, coordinator_.RunStep(one, Feeds(7), names));
  for (const std::string& name : names) ExpectBitwise(read.tensors.at(name), fetched.at(name), name);
  float acc_norm = 0;
  for (float v : read.tensors.at("w1/acc").floats()) acc_norm += v * v;
  EXPECT_GT(acc_norm, 0);  // mid-cycle: the accumulator holds gradients
}

TEST_F(CheckpointCoordinatorTest, APartialRestoreSetsThePresentVariablesAndLeavesTheOthers) {
  Register(2);
  // w1 as imported weights: distinct values, under the graph's dim names.
  Tensor w1(DType::kFloat32, Shape({{"d_in", 16}, {"hidden", 8}}));
  for (int64_t i = 0; i < w1.num_elements(); ++i) w1.f32()[i] = 0.01f * (i % 37) - 0.15f;
  const std::string imports = (fs::path(root_) / "imports" / "w1").string();
  fs::create_directories(imports);
  ASSERT_OK(WriteCheckpointFromTensors(imports, {{"w1", w1}}, /*step=*/7));

  // A session that has run a step, on another mesh and layout than the import's one processor.
  const std::string b = Create("x:2", "hidden:x");
  Step(b, 1);
  ASSERT_OK(coordinator_.SaveCheckpoint(b, "before").status());
  ASSERT_OK_AND_ASSIGN(CheckpointTensors before,
                       ReadCheckpointTensors((fs::path(root_) / "before").string()));
  // Without partial the import lacks w2 and step: refused, as before.
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, "imports/w1").status(),
                       absl::StatusCode::kInvalidArgument, {"missing", "'w2'", "'step'"}));
  ASSERT_OK_AND_ASSIGN(v1::RestoreCheckpointResponse restored,
                       coordinator_.RestoreCheckpoint(b, "imports/w1", /*partial=*/true));
  EXPECT_EQ(restored.step(), 7);
  TensorMap now = Fetch(coordinator_, b, 8);
  ExpectBitwise(now.at("w1"), w1, "w1 (imported)");
  ExpectBitwise(now.at("w2"), before.tensors.at("w2"), "w2 (kept)");
  ExpectBitwise(now.at("step"), before.tensors.at("step"), "step (kept)");
  ASSERT_OK(coordinator_.CloseSession(b));

  // Before the first step: the variables the import lacks start from their initializers, as on
  // a fresh session on the same mesh.
  const std::string fresh = Create("x:2", "d_in:x");
  const TensorMap initial = Fetch(coordinator_, fresh, 1);
  ASSERT_OK(coordinator_.CloseSession(fresh));
  const std::string c = Create("x:2", "d_in:x");
  ASSERT_OK(coordinator_.RestoreCheckpoint(c, "imports/w1", /*partial=*/true).status());
  now = Fetch(coordinator_, c, 1);
  ExpectBitwise(now.at("w1"), w1, "w1 (imported before the first step)");
  ExpectBitwise(now.at("w2"), initial.at("w2"), "w2 (initialised)");
  ExpectBitwise(now.at("step"), initial.at("step"), "step (initialised)");
}

TEST_F(CheckpointCoordinatorTest, APartialRestoreRefusesUnknownAndMismatchedVariables) {
  Register(2);
  const std::string b = Create("x:2", "hidden:x");
  Step(b, 1);
  const TensorMap kept = Fetch(coordinator_, b, 2);
  auto write = [&](const std::string& name, const std::map<std::string, Tensor>& tensors) {
    const std::string dir = (fs::path(root_) / name).string();
    fs::create_directories(dir);
    ASSERT_OK(WriteCheckpointFromTensors(dir, tensors, 3));
  };
  write("extra", {{"w2", kept.at("w2")}, {"nope", Tensor::Float(Shape({{"n", 2}}), {1, 2})}});
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, "extra", true).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"partially restoring", "does not have", "'nope'"}));
  write("shape", {{"w1", Tensor(DType::kFloat32, Shape({{"d_in", 16}, {"hidden", 4}}))}});
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, "shape", true).status(),
                       absl::StatusCode::kInvalidArgument, {"'w1'", "hidden:8", "hidden:4"}));
  write("dtype", {{"step", Tensor::Int(Shape({}), {5})}});
  EXPECT_TRUE(StatusIs(coordinator_.RestoreCheckpoint(b, "dtype", true).status(),
                       absl::StatusCode::kInvalidArgument, {"'step'", "int32"}));
  // Nothing changed: the next fetch sees the values after step 2 ran from `kept`; compare with a
  // second session run through the same steps.
  const TensorMap after = Fetch(coordinator_, b, 3);
  ASSERT_OK(coordinator_.CloseSession(b));
  const std::string twin = Create("x:2", "hidden:x");
  Step(twin, 1);
  Step(twin, 2);
  const TensorMap want = Fetch(coordinator_, twin, 3);
  for (const char* name : {"w1", "w2", "step"}) ExpectBitwise(after.at(name), want.at(name), name);
}

}  // namespace
}  // namespace meshrt
