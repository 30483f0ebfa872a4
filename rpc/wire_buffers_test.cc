#include "rpc/wire_buffers.h"

#include "core/ir/slicing.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

WireBuffers::Options Small() {
  WireBuffers::Options o;
  o.min_bytes = 1024;
  o.max_bytes = 64 << 10;
  o.max_buffers = 3;
  return o;
}

Shape Floats(int64_t n) { return Shape({{"n", n}}); }

TEST(WireBuffersTest, ReusesTheStorageOfARecycledTensorOfAboutTheSameSize) {
  WireBuffers buffers(Small());
  Tensor t = buffers.New(DType::kFloat32, Floats(4096));  // 16 KiB
  const void* storage = TensorData(t);
  buffers.Recycle(std::move(t));
  EXPECT_EQ(buffers.kept_buffers(), 1);
  EXPECT_EQ(buffers.kept_bytes(), 16 << 10);
  // Another dtype, a size it cannot hold, one less than half its size: fresh storage.
  EXPECT_NE(TensorData(buffers.New(DType::kInt32, Floats(4096))), storage);
  EXPECT_NE(TensorData(buffers.New(DType::kFloat32, Floats(4097))), storage);
  EXPECT_NE(TensorData(buffers.New(DType::kFloat32, Floats(2047))), storage);
  EXPECT_EQ(buffers.kept_buffers(), 1);
  // A smaller tensor of the same dtype and another shape gets it.
  Tensor again = buffers.New(DType::kFloat32, Shape({{"a", 32}, {"b", 100}}));
  EXPECT_EQ(TensorData(again), storage);
  EXPECT_EQ(again.shape(), Shape({{"a", 32}, {"b", 100}}));
  EXPECT_EQ(buffers.kept_buffers(), 0);
  EXPECT_EQ(buffers.kept_bytes(), 0);
}

TEST(WireBuffersTest, TakesTheSmallestThatFits) {
  WireBuffers buffers(Small());
  Tensor big = buffers.New(DType::kInt32, Floats(3000));
  Tensor small = buffers.New(DType::kInt32, Floats(2100));
  const void* small_storage = TensorData(small);
  buffers.Recycle(std::move(big));
  buffers.Recycle(std::move(small));
  EXPECT_EQ(TensorData(buffers.New(DType::kInt32, Floats(2000))), small_storage);
}

TEST(WireBuffersTest, StaysWithinItsLimits) {
  WireBuffers buffers(Small());
  buffers.Recycle(buffers.New(DType::kFloat32, Floats(100)));     // under min_bytes
  buffers.Recycle(buffers.New(DType::kFloat32, Floats(20000)));   // over max_bytes alone
  EXPECT_EQ(buffers.kept_buffers(), 0);
  std::vector<const void*> storage;
  for (int i = 0; i < 4; ++i) {
    Tensor t = buffers.New(DType::kFloat32, Floats(1024 * (i + 1)));
    storage.push_back(TensorData(t));
    buffers.Recycle(std::move(t));
  }
  // Four buffers of 4, 8, 12, 16 KiB: the oldest goes for max_buffers (3).
  EXPECT_EQ(buffers.kept_buffers(), 3);
  EXPECT_EQ(buffers.kept_bytes(), (8 + 12 + 16) << 10);
  // 36 KiB + 40 KiB passes max_bytes (64 KiB): the oldest kept go until it fits.
  buffers.Recycle(buffers.New(DType::kFloat32, Floats(10240)));
  EXPECT_EQ(buffers.kept_bytes(), (16 + 40) << 10);
  EXPECT_EQ(buffers.kept_buffers(), 2);
  EXPECT_EQ(TensorData(buffers.New(DType::kFloat32, Floats(4096))), storage[3]);
}

TEST(WireBuffersTest, SharedTensorsAreRecycledWhenTheLastReferenceGoes) {
  const int64_t before = WireBuffers::Default().kept_buffers();
  std::map<std::string, Tensor> tensors;
  tensors.emplace("x", NewTensorForWire(DType::kFloat32, Floats(1 << 20)));  // 4 MiB
  const void* storage = TensorData(tensors.at("x"));
  auto shared = ShareAndRecycle(std::move(tensors));
  auto copy = shared;
  shared.reset();
  EXPECT_EQ(WireBuffers::Default().kept_buffers(), before);
  copy.reset();
  EXPECT_EQ(WireBuffers::Default().kept_buffers(), before + 1);
  EXPECT_EQ(TensorData(NewTensorForWire(DType::kFloat32, Floats(1 << 20))), storage);
}

}  // namespace
}  // namespace meshrt
