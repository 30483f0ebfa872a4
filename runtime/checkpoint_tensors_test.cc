#include "runtime/checkpoint_tensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint_store.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;

void ExpectBitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.num_elements(), want.num_elements()) << what;
  const void* a = got.dtype() == DType::kFloat32 ? static_cast<const void*>(got.f32())
                                                 : static_cast<const void*>(got.i32());
  const void* b = want.dtype() == DType::kFloat32 ? static_cast<const void*>(want.f32())
                                                  : static_cast<const void*>(want.i32());
  EXPECT_EQ(std::memcmp(a, b, got.num_elements() * 4), 0) << what;
}

std::map<std::string, Tensor> Sample(float scale) {
  Tensor w(DType::kFloat32, Shape({{"d_in", 3}, {"d_out", 5}}));
  for (int64_t i = 0; i < w.num_elements(); ++i) w.f32()[i] = scale * (i - 7.5f) / 3;
  w.f32()[4] = -0.0f;
  return {{"layer_0/w", w},
          {"step", Tensor::Int(Shape({}), {static_cast<int32_t>(scale * 10)})},
          {"b", Tensor::Float(Shape({{"d_out", 5}}), {1, 2, 3, 4, 5})}};
}

TEST(CheckpointTensorsTest, WrittenTensorsReadBackBitwise) {
  const std::string dir = MakeTestTempDir("ckt");
  ASSERT_OK(WriteCheckpointFromTensors(dir, Sample(1), /*step=*/12));
  ASSERT_OK_AND_ASSIGN(CheckpointTensors got, ReadCheckpointTensors(dir));
  EXPECT_EQ(got.step, 12);
  const auto want = Sample(1);
  ASSERT_EQ(got.tensors.size(), want.size());
  for (const auto& [name, t] : want) ExpectBitwise(got.tensors.at(name), t, name);
  // One whole shard per variable, in a committed version (CURRENT).
  ASSERT_OK_AND_ASSIGN(CommittedCheckpoint committed, ReadCommittedCheckpoint(dir));
  EXPECT_EQ(committed.manifest.shards_size(), 3);
  EXPECT_EQ(committed.manifest.mesh().dims_size(), 1);
}

TEST(CheckpointTensorsTest, ANewWriteCommitsANewVersionAndKeepsThePrevious) {
  const std::string dir = MakeTestTempDir("ckt");
  ASSERT_OK(WriteCheckpointFromTensors(dir, Sample(1), 1));
  ASSERT_OK_AND_ASSIGN(CommittedCheckpoint first, ReadCommittedCheckpoint(dir));
  ASSERT_OK(WriteCheckpointFromTensors(dir, Sample(2), 2));
  ASSERT_OK_AND_ASSIGN(CheckpointTensors got, ReadCheckpointTensors(dir));
  EXPECT_EQ(got.step, 2);
  ExpectBitwise(got.tensors.at("layer_0/w"), Sample(2).at("layer_0/w"), "w");
  EXPECT_TRUE(fs::exists(first.directory));  // keep = 2: the previous version is a fallback
  ASSERT_OK(WriteCheckpointFromTensors(dir, Sample(3), 3, /*keep=*/1));
  EXPECT_FALSE(fs::exists(first.directory));
  ASSERT_OK_AND_ASSIGN(got, ReadCheckpointTensors(dir));
  EXPECT_EQ(got.step, 3);
}

TEST(CheckpointTensorsTest, ACorruptedShardIsDataLossNamingIt) {
  const std::string dir = MakeTestTempDir("ckt");
  ASSERT_OK(WriteCheckpointFromTensors(dir, Sample(1), 1));
  ASSERT_OK_AND_ASSIGN(CommittedCheckpoint committed, ReadCommittedCheckpoint(dir));
  const std::string shard = (fs::path(committed.directory) / "layer_0%2Fw.0_0.shard").string();
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << shard;
    f.seekp(5);
    f.put('\x42');
  }
  EXPECT_TRUE(StatusIs(ReadCheckpointTensors(dir).status(), absl::StatusCode::kDataLoss,
                       {"layer_0%2Fw.0_0.shard", "checksum"}));
}

TEST(CheckpointTensorsTest, BadInputIsRefused) {
  const std::string dir = MakeTestTempDir("ckt");
  EXPECT_TRUE(StatusIs(ReadCheckpointTensors(dir).status(), absl::StatusCode::kNotFound));
  EXPECT_TRUE(StatusIs(WriteCheckpointFromTensors(dir, Sample(1), -1),
                       absl::StatusCode::kInvalidArgument, {"step"}));
  EXPECT_TRUE(StatusIs(WriteCheckpointFromTensors(dir, Sample(1), 1, 0),
                       absl::StatusCode::kInvalidArgument, {"keep"}));
  EXPECT_TRUE(StatusIs(WriteCheckpointFromTensors(dir, {{"", Tensor::Int(Shape({}), {1})}}, 1),
                       absl::StatusCode::kInvalidArgument, {"empty name"}));
  // meshrt's dims have at least one element.
  EXPECT_TRUE(StatusIs(WriteCheckpointFromTensors(
                           dir, {{"empty", Tensor(DType::kFloat32, Shape({{"n", 0}}))}}, 1),
                       absl::StatusCode::kInvalidArgument, {"'empty'", "size 0"}));
  EXPECT_FALSE(WriteCheckpointFromTensors(dir + "/absent", Sample(1), 1).ok());
  // Nothing was committed by the refused writes.
  EXPECT_FALSE(fs::exists(fs::path(dir) / kCheckpointCurrentFile));
}

}  // namespace
}  // namespace meshrt
