#include "rpc/tensor_chunks.h"

#include <vector>

#include "core/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

std::vector<v1::TensorChunk> Chunks(const std::string& name, const Tensor& t, int64_t bytes) {
  std::vector<v1::TensorChunk> out;
  EXPECT_TRUE(ForEachChunk(name, t, [&](v1::TensorChunk& c) {
                out.push_back(c);
                return absl::OkStatus();
              }, bytes).ok());
  return out;
}

Tensor Iota(const Shape& s) {
  std::vector<float> v(s.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::Float(s, v);
}

TEST(TensorChunksTest, RoundTripsSeveralTensorsInSmallChunks) {
  Tensor a = Iota(Shape({{"a", 10}, {"b", 3}}));  // 120 bytes -> chunks of 32
  Tensor b = Tensor::Int(Shape({{"c", 2}}), {7, -9});
  std::vector<v1::TensorChunk> ca = Chunks("a", a, 32), cb = Chunks("b", b, 32);
  EXPECT_EQ(ca.size(), 4u);
  EXPECT_TRUE(ca.back().last());
  EXPECT_FALSE(ca.front().last());
  TensorAssembler asm_;
  for (auto& c : ca) ASSERT_OK(asm_.Add(c));
  for (auto& c : cb) ASSERT_OK(asm_.Add(c));
  ASSERT_OK_AND_ASSIGN(TensorMap m, asm_.Finish());
  EXPECT_EQ(MaxRelativeError(m.at("a"), a), 0);
  EXPECT_EQ(m.at("b").ints(), b.ints());
}

TEST(TensorChunksTest, ScalarAndEmptyShapes) {
  Tensor s = Tensor::Float(Shape(), {3.5f});
  std::vector<v1::TensorChunk> c = Chunks("s", s, 1 << 20);
  ASSERT_EQ(c.size(), 1u);
  TensorAssembler asm_;
  ASSERT_OK(asm_.Add(c[0]));
  ASSERT_OK_AND_ASSIGN(TensorMap m, asm_.Finish());
  EXPECT_EQ(m.at("s").f32()[0], 3.5f);
}

TEST(TensorChunksTest, RefusesGapsDuplicatesAndIncompleteTensors) {
  Tensor a = Iota(Shape({{"a", 16}}));
  std::vector<v1::TensorChunk> c = Chunks("a", a, 16);
  ASSERT_EQ(c.size(), 4u);
  {
    TensorAssembler asm_;
    ASSERT_OK(asm_.Add(c[0]));
    EXPECT_TRUE(StatusIs(asm_.Add(c[2]), absl::StatusCode::kInvalidArgument,
                         {"tensor 'a'", "offset 32"}));
  }
  {
    TensorAssembler asm_;
    EXPECT_TRUE(StatusIs(asm_.Add(c[1]), absl::StatusCode::kInvalidArgument,
                         {"before its first chunk"}));
  }
  {
    TensorAssembler asm_;
    ASSERT_OK(asm_.Add(c[0]));
    ASSERT_OK(asm_.Add(c[1]));
    EXPECT_TRUE(StatusIs(asm_.Finish().status(), absl::StatusCode::kFailedPrecondition,
                         {"tensor 'a' is incomplete"}));
  }
  {
    TensorAssembler asm_(32);
    EXPECT_TRUE(StatusIs(asm_.Add(c[0]), absl::StatusCode::kInvalidArgument, {"limit"}));
  }
}

}  // namespace
}  // namespace meshrt
