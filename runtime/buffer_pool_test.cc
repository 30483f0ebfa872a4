#include "runtime/buffer_pool.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace meshrt {
namespace {

Shape S(const char* spec) { return *Shape::Parse(spec); }

TEST(BufferPoolTest, ReusesTheMemoryOfAReleasedTensorOfTheSameSize) {
  BufferPool pool;
  Tensor a = pool.Take(DType::kFloat32, S("x:128,y:256"));  // 128 KiB
  const float* memory = a.f32();
  pool.Release(std::move(a));
  EXPECT_EQ(pool.pooled_bytes(), 128 * 256 * 4);
  // Same element count, another shape: the same memory, with the new shape.
  Tensor b = pool.Take(DType::kFloat32, S("z:32768"));
  EXPECT_EQ(b.f32(), memory);
  EXPECT_EQ(b.shape(), S("z:32768"));
  EXPECT_EQ(pool.reused(), 1);
  EXPECT_EQ(pool.pooled_bytes(), 0);
  // Nothing pooled any more: a fresh allocation.
  Tensor c = pool.Take(DType::kFloat32, S("z:32768"));
  EXPECT_NE(c.f32(), memory);
  EXPECT_EQ(pool.reused(), 1);
}

TEST(BufferPoolTest, MatchesDtypeAndElementCountExactly) {
  BufferPool pool;
  pool.Release(pool.Take(DType::kFloat32, S("x:65536")));
  Tensor other_dtype = pool.Take(DType::kInt32, S("x:65536"));
  Tensor other_count = pool.Take(DType::kFloat32, S("x:65537"));
  EXPECT_EQ(pool.reused(), 0);
  EXPECT_EQ(pool.pooled_bytes(), 65536 * 4);
  EXPECT_EQ(other_dtype.dtype(), DType::kInt32);
  EXPECT_EQ(other_count.num_elements(), 65537);
}

TEST(BufferPoolTest, LeavesSmallTensorsToMallocAndRespectsItsLimit) {
  BufferPool pool(/*max_bytes=*/3 * BufferPool::kMinBytes);
  pool.Release(Tensor(DType::kFloat32, S("x:16")));  // below kMinBytes
  EXPECT_EQ(pool.pooled_bytes(), 0);
  const int64_t n = BufferPool::kMinBytes / 4;
  const Shape shape({{"x", n}});
  pool.Release(pool.Take(DType::kFloat32, shape));
  pool.Release(pool.Take(DType::kFloat32, Shape({{"x", n + 1}})));
  EXPECT_EQ(pool.pooled_bytes(), BufferPool::kMinBytes + (n + 1) * 4);
  pool.Release(pool.Take(DType::kFloat32, Shape({{"x", n + 2}})));  // would exceed: freed
  EXPECT_EQ(pool.pooled_bytes(), BufferPool::kMinBytes + (n + 1) * 4);
  pool.Clear();
  EXPECT_EQ(pool.pooled_bytes(), 0);
}

TEST(BufferPoolTest, NewStepFreesWhatAWholeStepLeftUntaken) {
  BufferPool pool;
  const Shape shape({{"x", BufferPool::kMinBytes / 4}});
  pool.Release(pool.Take(DType::kFloat32, shape));  // pooled during step 0
  pool.NewStep();                                   // step 1: still kept
  EXPECT_EQ(pool.pooled_bytes(), BufferPool::kMinBytes);
  // Taken and given back during step 1: counts as used, kept again.
  pool.Release(pool.Take(DType::kFloat32, shape));
  EXPECT_EQ(pool.reused(), 1);
  pool.NewStep();  // step 2
  EXPECT_EQ(pool.pooled_bytes(), BufferPool::kMinBytes);
  pool.NewStep();  // step 3: untaken through all of step 2
  EXPECT_EQ(pool.pooled_bytes(), 0);
  pool.Take(DType::kFloat32, shape);
  EXPECT_EQ(pool.reused(), 1);
}

TEST(BufferPoolTest, StorageArrivingEveryStepDoesNotPileUp) {
  // As feeds moved into the executor: each step releases one more buffer than it takes.
  BufferPool pool;
  const Shape shape({{"x", BufferPool::kMinBytes / 4}});
  for (int step = 0; step < 20; ++step) {
    pool.NewStep();
    pool.Release(Tensor::Uninitialized(DType::kFloat32, shape));
    EXPECT_LE(pool.pooled_bytes(), 2 * BufferPool::kMinBytes) << "step " << step;
  }
}

TEST(BufferPoolTest, ConcurrentTakesAndReleasesKeepTheAccounting) {
  BufferPool pool;
  const Shape shape({{"x", BufferPool::kMinBytes / 4}});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) pool.Release(pool.Take(DType::kFloat32, shape));
    });
  }
  for (std::thread& t : threads) t.join();
  // At most one buffer per thread was ever out at once, so at most four exist.
  EXPECT_GT(pool.reused(), 0);
  EXPECT_LE(pool.pooled_bytes(), 4 * BufferPool::kMinBytes);
  EXPECT_EQ(pool.pooled_bytes() % BufferPool::kMinBytes, 0);
}

TEST(BufferPoolTest, RecycledTensorsArePoisonedUnderTests) {
  // .bazelrc sets MESHRT_POISON_UNINITIALIZED=1 for tests: a recycled buffer must not hand its old
  // values to a kernel that forgets to write some element.
  const char* poison = std::getenv("MESHRT_POISON_UNINITIALIZED");
  ASSERT_TRUE(poison != nullptr && std::string(poison) == "1")
      << "run under bazel test (.bazelrc sets MESHRT_POISON_UNINITIALIZED=1)";
  BufferPool pool;
  Tensor a = pool.Take(DType::kFloat32, S("x:65536"));
  for (int64_t i = 0; i < a.num_elements(); ++i) a.f32()[i] = 1.0f;
  pool.Release(std::move(a));
  Tensor b = pool.Take(DType::kFloat32, S("x:65536"));
  ASSERT_EQ(pool.reused(), 1);
  for (int64_t i = 0; i < b.num_elements(); i += 4099) EXPECT_TRUE(std::isnan(b.f32()[i])) << i;
}

}  // namespace
}  // namespace meshrt
