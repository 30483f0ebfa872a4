#include "kernels/scaled_add.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace meshrt {
namespace kernels {
namespace {

// The mul op's rounding, then the add op's, one element at a time.
std::vector<float> Want(const std::vector<float>& x, const std::vector<float>& y, float s,
                        int64_t offset, int64_t n) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    volatile float t = y[offset + i] * s;  // rounded to float, never contracted
    out[i] = x[offset + i] + t;
  }
  return out;
}

TEST(ScaledAddTest, SmallAndStreamedOutputsAreBitwiseTheMulThenAdd) {
  const int64_t big = kStreamingBytes / 4 + 37;  // streamed, with a scalar tail
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1e4f, 1e4f);
  std::vector<float> x(big + 8), y(big + 8);
  for (float& v : x) v = u(rng);
  for (float& v : y) v = u(rng) * 1e-3f;
  const float s = -0.0123f;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{1000}, big}) {
    // Every output alignment: the streamed part starts after a scalar head.
    for (int64_t offset : {0, 1, 2, 3}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " offset " << offset);
      std::vector<float> out(n + 4, 0.0f);
      ScaledAdd(x.data() + offset, y.data() + offset, s, out.data() + offset, n);
      const std::vector<float> want = Want(x, y, s, offset, n);
      ASSERT_EQ(std::memcmp(out.data() + offset, want.data(), n * sizeof(float)), 0);
      for (int64_t i = 0; i < offset; ++i) EXPECT_EQ(out[i], 0.0f);          // nothing before
      for (int64_t i = offset + n; i < n + 4; ++i) EXPECT_EQ(out[i], 0.0f);  // nor after
    }
  }
}

TEST(ScaledAddTest, InPlaceOverXIsTheSame) {
  const int64_t n = kStreamingBytes / 4 + 3;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 0.5f + static_cast<float>(i % 97) * 0.01f;
    y[i] = -static_cast<float>(i % 13) * 0.3f;
  }
  const std::vector<float> want = Want(x, y, 0.7f, 0, n);
  ScaledAdd(x.data(), y.data(), 0.7f, x.data(), n);
  EXPECT_EQ(std::memcmp(x.data(), want.data(), n * sizeof(float)), 0);
}

}  // namespace
}  // namespace kernels
}  // namespace meshrt
