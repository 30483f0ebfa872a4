#include "kernels/fast_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace meshrt {
namespace kernels {
namespace {

TEST(FastExpTest, MatchesDoublePrecisionExpOverTheNormalRange) {
  double worst = 0;
  float worst_x = 0;
  for (float x = -87.3f; x < 88.7f; x += 0.000731f) {
    const double want = std::exp(static_cast<double>(x));
    const double rel = std::fabs(FastExp(x) - want) / want;
    if (rel > worst) {
      worst = rel;
      worst_x = x;
    }
  }
  EXPECT_LT(worst, 3e-7) << "at x = " << worst_x;
  EXPECT_EQ(FastExp(0.0f), 1.0f);
}

TEST(FastExpTest, EdgesFlushUnderflowOverflowToInfAndKeepNaN) {
  EXPECT_EQ(FastExp(-1e9f), 0.0f);  // masked attention logits
  EXPECT_EQ(FastExp(-87.5f), 0.0f);  // would be a denormal: flushed
  EXPECT_EQ(FastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(FastExp(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(FastExp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(FastExp(std::nanf(""))));
  // Both ends of the exponent range stay finite and accurate (2^n built in two halves).
  EXPECT_NEAR(FastExp(88.72f) / std::exp(static_cast<double>(88.72f)), 1.0, 1e-6);
  EXPECT_NEAR(FastExp(-87.33f) / std::exp(static_cast<double>(-87.33f)), 1.0, 1e-6);
}

TEST(FastMathArraysTest, AgreeWithScalarFormulasAtEveryLength) {
  for (int64_t n : {0, 1, 15, 16, 17, 33, 1000}) {
    SCOPED_TRACE(n);
    std::vector<float> a(n), b(n), out(n);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = std::sin(0.37f * i) * 20.0f;
      b[i] = std::cos(0.11f * i) * 3.0f;
    }
    ExpArray(a.data(), 1.5f, out.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(out[i], FastExp(a[i] - 1.5f)) << i;
    ExpDiffArray(a.data(), b.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(out[i], FastExp(a[i] - b[i])) << i;
    SigmoidArray(a.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(out[i], 1.0 / (1.0 + std::exp(-static_cast<double>(a[i]))), 1e-6) << i;
    }
    double sum = 0;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      sum += a[i];
      max = std::max(max, a[i]);
    }
    EXPECT_NEAR(SumArray(a.data(), n), sum, 1e-3);
    EXPECT_EQ(MaxArray(a.data(), n), max);
    float min = std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) min = std::min(min, a[i]);
    EXPECT_EQ(MinArray(a.data(), n), min);
    double dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(a[i]) * b[i];
    EXPECT_NEAR(DotArray(a.data(), b.data(), n), dot, 1e-3);
  }
}

TEST(FastMathArraysTest, InPlaceIsAllowed) {
  std::vector<float> a = {0.0f, 1.0f, -1.0f};
  ExpArray(a.data(), 0.0f, a.data(), 3);
  EXPECT_FLOAT_EQ(a[0], 1.0f);
  EXPECT_NEAR(a[1], std::exp(1.0), 1e-6);
  EXPECT_NEAR(a[2], std::exp(-1.0), 1e-7);
}

}  // namespace
}  // namespace kernels
}  // namespace meshrt
