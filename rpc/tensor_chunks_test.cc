#include "rpc/tensor_chunks.h"

#include <vector>

#include "core/ir/slicing.h"
#include "core/testing/test_util.h"
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

// Placed tensors: written into their region of the caller's tensor, refused when the chunks
// declare another dtype or shape, reported incomplete when cut short.
TEST(TensorChunksTest, PlacesTensorsIntoTheirRegionAndChecksThem) {
  const Shape whole_shape({{"a", 4}, {"b", 6}});
  Tensor whole(DType::kFloat32, whole_shape);
  ASSERT_OK_AND_ASSIGN(TensorRegion region,
                       TensorRegion::Box(DType::kFloat32, whole_shape, {1, 2},
                                         Shape({{"a", 2}, {"b", 3}})));
  const Tensor slice = Tensor::Float(Shape({{"a", 2}, {"b", 3}}), {1, 2, 3, 4, 5, 6});
  {
    TensorAssembler asm_;
    asm_.PlaceInto("s", static_cast<char*>(TensorData(&whole)), region);
    // 10-byte chunks: boundaries inside elements and across the slice's row.
    for (auto& c : Chunks("s", slice, 10)) ASSERT_OK(asm_.Add(c));
    EXPECT_TRUE(asm_.Complete("s"));
    ASSERT_OK_AND_ASSIGN(TensorMap rest, asm_.Finish());
    EXPECT_TRUE(rest.empty());
    const std::vector<float> expected = {0, 0, 0, 0, 0, 0,  //
                                         0, 0, 1, 2, 3, 0,  //
                                         0, 0, 4, 5, 6, 0,  //
                                         0, 0, 0, 0, 0, 0};
    EXPECT_EQ(std::vector<float>(whole.floats().begin(), whole.floats().end()), expected);
  }
  {
    TensorAssembler asm_;
    asm_.PlaceInto("s", static_cast<char*>(TensorData(&whole)), region);
    const Tensor wrong_shape = Tensor::Float(Shape({{"a", 3}, {"b", 2}}), {1, 2, 3, 4, 5, 6});
    EXPECT_TRUE(StatusIs(asm_.Add(Chunks("s", wrong_shape, 64)[0]),
                         absl::StatusCode::kInvalidArgument,
                         {"tensor 's' arrived as float32 [a:3, b:2]",
                          "its place holds float32 [a:2, b:3]"}));
    const Tensor wrong_dtype = Tensor::Int(Shape({{"a", 2}, {"b", 3}}), {1, 2, 3, 4, 5, 6});
    EXPECT_TRUE(StatusIs(asm_.Add(Chunks("s", wrong_dtype, 64)[0]),
                         absl::StatusCode::kInvalidArgument, {"arrived as int32"}));
  }
  {
    TensorAssembler asm_;
    asm_.PlaceInto("s", static_cast<char*>(TensorData(&whole)), region);
    std::vector<v1::TensorChunk> c = Chunks("s", slice, 8);
    ASSERT_OK(asm_.Add(c[0]));
    EXPECT_FALSE(asm_.Complete("s"));
    EXPECT_TRUE(StatusIs(asm_.Finish().status(), absl::StatusCode::kFailedPrecondition,
                         {"tensor 's' is incomplete: 8 bytes received"}));
  }
}

// A stream that claims the last chunk early, or sends more than the shape holds.
TEST(TensorChunksTest, RefusesTruncatedAndOversizedTensors) {
  Tensor a = Iota(Shape({{"a", 5}}));  // 20 bytes
  std::vector<v1::TensorChunk> c = Chunks("a", a, 8);
  ASSERT_EQ(c.size(), 3u);
  {
    TensorAssembler asm_;
    v1::TensorChunk early = c[0];
    early.set_last(true);
    EXPECT_TRUE(StatusIs(asm_.Add(early), absl::StatusCode::kInvalidArgument,
                         {"tensor 'a' ended after 8 of 20 bytes"}));
  }
  {
    TensorAssembler asm_;
    ASSERT_OK(asm_.Add(c[0]));
    ASSERT_OK(asm_.Add(c[1]));
    v1::TensorChunk big = c[2];
    big.set_data(std::string(12, 'x'));
    EXPECT_TRUE(StatusIs(asm_.Add(big), absl::StatusCode::kInvalidArgument,
                         {"tensor 'a'", "12 bytes does not follow the 16 bytes received of 20"}));
  }
  {
    // The data in pieces (as gRPC delivers it) adds up like one string.
    TensorAssembler asm_;
    const std::string bytes = c[0].data();
    const std::vector<absl::string_view> pieces = {absl::string_view(bytes).substr(0, 3),
                                                   absl::string_view(bytes).substr(3)};
    v1::TensorChunk meta = c[0];
    meta.clear_data();
    ASSERT_OK(asm_.Add(meta, pieces));
    ASSERT_OK(asm_.Add(c[1]));
    ASSERT_OK(asm_.Add(c[2]));
    ASSERT_OK_AND_ASSIGN(TensorMap m, asm_.Finish());
    EXPECT_EQ(MaxRelativeError(m.at("a"), a), 0);
  }
}

}  // namespace
}  // namespace meshrt
