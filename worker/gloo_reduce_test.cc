#include "worker/gloo_reduce.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace meshrt {
namespace {

TEST(GlooReduceTest, FloatOps) {
  const std::vector<float> a = {1.5f, -2, 3, 0}, b = {2, -3, -1, 7};
  struct Case {
    v1::ReduceOp op;
    std::vector<float> want;
  };
  for (const Case& c :
       {Case{v1::REDUCE_SUM, {3.5f, -5, 2, 7}}, Case{v1::REDUCE_PROD, {3, 6, -3, 0}},
        Case{v1::REDUCE_MAX, {2, -2, 3, 7}}, Case{v1::REDUCE_MIN, {1.5f, -3, -1, 0}}}) {
    auto f = GlooReduceFunction(c.op, DType::kFloat32);
    ASSERT_TRUE(f) << v1::ReduceOp_Name(c.op);
    std::vector<float> out = a;  // in place, as Gloo calls it (c == a)
    f(out.data(), out.data(), b.data(), out.size());
    EXPECT_EQ(out, c.want) << v1::ReduceOp_Name(c.op);
  }
}

TEST(GlooReduceTest, Int32OpsWrap) {
  const int32_t big = std::numeric_limits<int32_t>::max();
  const std::vector<int32_t> a = {big, 3, -4, 65536}, b = {1, -5, 2, 65536};
  struct Case {
    v1::ReduceOp op;
    std::vector<int32_t> want;
  };
  for (const Case& c :
       {Case{v1::REDUCE_SUM, {std::numeric_limits<int32_t>::min(), -2, -2, 131072}},
        Case{v1::REDUCE_PROD, {big, -15, -8, 0}},  // 2^16 * 2^16 wraps to 0
        Case{v1::REDUCE_MAX, {big, 3, 2, 65536}}, Case{v1::REDUCE_MIN, {1, -5, -4, 65536}}}) {
    auto f = GlooReduceFunction(c.op, DType::kInt32);
    ASSERT_TRUE(f) << v1::ReduceOp_Name(c.op);
    std::vector<int32_t> out(a.size());
    f(out.data(), a.data(), b.data(), out.size());
    EXPECT_EQ(out, c.want) << v1::ReduceOp_Name(c.op);
  }
}

TEST(GlooReduceTest, InvalidOpHasNoFunction) {
  EXPECT_FALSE(GlooReduceFunction(v1::REDUCE_INVALID, DType::kFloat32));
  EXPECT_FALSE(GlooReduceFunction(static_cast<v1::ReduceOp>(99), DType::kInt32));
}

}  // namespace
}  // namespace meshrt
