#include "rpc/tensor_region.h"

#include <cstring>
#include <vector>

#include "core/ir/slicing.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "rpc/test_tensors.h"

namespace meshrt {
namespace {

struct Case {
  const char* mesh;
  std::vector<int> layout;  // per tensor dim: mesh axis or -1
};

// Every processor of 2-D and 1-D meshes, both dtypes, odd sizes, splits on every dim.
TEST(TensorRegionTest, ExtractAndScatterMatchCoreSlicingOnEveryProcessor) {
  const Shape shape({{"a", 6}, {"b", 9}, {"c", 5}});
  const std::vector<Case> cases = {
      {"r:2,c:3", {0, 1, -1}}, {"r:2,c:3", {1, -1, -1}}, {"r:2,c:3", {-1, 1, -1}},
      {"r:3,c:1", {-1, 0, -1}}, {"r:2,c:3", {-1, -1, -1}}, {"p:5", {-1, -1, 0}},
      {"p:3", {0, -1, -1}},     {"r:3,c:2", {1, 0, -1}},
  };
  for (DType dtype : {DType::kFloat32, DType::kInt32}) {
    const Tensor whole = Iota(dtype, shape);
    for (const Case& c : cases) {
      ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(c.mesh));
      const TensorLayout layout{c.layout};
      Tensor rebuilt(dtype, shape);
      for (int p = 0; p < mesh.num_processors(); ++p) {
        const std::vector<int64_t> coord = mesh.Coordinate(p);
        const TensorRegion region = TensorRegion::OfProcessor(dtype, shape, layout, mesh, coord);
        const Tensor expected = ExtractSlice(whole, layout, mesh, coord);
        EXPECT_EQ(region.slice_shape(), expected.shape());
        EXPECT_EQ(region.bytes(), TensorBytes(expected));
        EXPECT_EQ(region.whole_bytes(), TensorBytes(whole));
        EXPECT_TRUE(SameBytes(region.Extract(whole), expected)) << c.mesh << " p" << p;
        region.Scatter(static_cast<const char*>(TensorData(expected)), 0, region.bytes(),
                       static_cast<char*>(TensorData(&rebuilt)));
      }
      EXPECT_TRUE(SameBytes(rebuilt, whole)) << c.mesh;
    }
  }
}

// Pieces of arbitrary lengths, so a piece boundary falls inside an element and inside a row.
TEST(TensorRegionTest, GatherAndScatterInPiecesOfOddLengths) {
  const Shape shape({{"a", 7}, {"b", 6}, {"c", 3}});
  const Tensor whole = Iota(DType::kFloat32, shape);
  ASSERT_OK_AND_ASSIGN(TensorRegion region,
                       TensorRegion::Box(DType::kFloat32, shape, {2, 1, 0},
                                         Shape({{"a", 4}, {"b", 3}, {"c", 3}})));
  EXPECT_EQ(region.run_bytes(), 3 * 3 * 4);  // dims b (partial) and c (whole) form a run
  const Tensor expected = region.Extract(whole);
  for (int64_t piece : {1, 3, 5, 7, 36, 37, 1000}) {
    std::vector<char> gathered(region.bytes());
    Tensor scattered(DType::kFloat32, shape);
    for (int64_t at = 0; at < region.bytes(); at += piece) {
      const int64_t n = std::min(piece, region.bytes() - at);
      region.Gather(static_cast<const char*>(TensorData(whole)), at, n, gathered.data() + at);
      region.Scatter(static_cast<const char*>(TensorData(expected)) + at, at, n,
                     static_cast<char*>(TensorData(&scattered)));
    }
    EXPECT_EQ(std::memcmp(gathered.data(), TensorData(expected), region.bytes()), 0) << piece;
    // The box's elements are in place; everything else is still zero.
    Tensor only_box(DType::kFloat32, shape);
    region.Scatter(static_cast<const char*>(TensorData(expected)), 0, region.bytes(),
                   static_cast<char*>(TensorData(&only_box)));
    EXPECT_TRUE(SameBytes(scattered, only_box)) << piece;
    EXPECT_EQ(scattered.f32()[(2 * 6 + 1) * 3], whole.f32()[(2 * 6 + 1) * 3]);
    EXPECT_EQ(scattered.f32()[0], 0.0f);
  }
}

TEST(TensorRegionTest, RunsAndTheirOffsets) {
  const Shape shape({{"a", 4}, {"b", 8}});
  // The outermost dim split: one run.
  ASSERT_OK_AND_ASSIGN(TensorRegion rows,
                       TensorRegion::Box(DType::kInt32, shape, {2, 0}, Shape({{"a", 2}, {"b", 8}})));
  EXPECT_EQ(rows.run_bytes(), rows.bytes());
  std::vector<std::vector<int64_t>> runs;
  rows.ForEachRun(4, 40, [&](int64_t at, int64_t from, int64_t n) { runs.push_back({at, from, n}); });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{2 * 32 + 4, 4, 40}}));
  // The inner dim split: a run per row, starting in the middle of one.
  ASSERT_OK_AND_ASSIGN(TensorRegion cols,
                       TensorRegion::Box(DType::kInt32, shape, {0, 6}, Shape({{"a", 4}, {"b", 2}})));
  EXPECT_EQ(cols.run_bytes(), 8);
  runs.clear();
  cols.ForEachRun(4, 16, [&](int64_t at, int64_t from, int64_t n) { runs.push_back({at, from, n}); });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{28, 4, 4}, {56, 8, 8}, {88, 16, 4}}));
  const TensorRegion whole = TensorRegion::Whole(DType::kInt32, shape);
  EXPECT_EQ(whole.bytes(), 128);
  EXPECT_EQ(whole.run_bytes(), 128);
  const TensorRegion scalar = TensorRegion::Whole(DType::kFloat32, Shape());
  EXPECT_EQ(scalar.bytes(), 4);
}

TEST(TensorRegionTest, BoxRefusesWhatDoesNotFit) {
  const Shape shape({{"a", 4}, {"b", 8}});
  EXPECT_TRUE(StatusIs(
      TensorRegion::Box(DType::kFloat32, shape, {3, 0}, Shape({{"a", 2}, {"b", 8}})).status(),
      absl::StatusCode::kInvalidArgument, {"[a:2, b:8]", "at (3,0)", "[a:4, b:8]"}));
  EXPECT_TRUE(StatusIs(
      TensorRegion::Box(DType::kFloat32, shape, {0, 0}, Shape({{"b", 4}, {"a", 2}})).status(),
      absl::StatusCode::kInvalidArgument, {"does not fit"}));
  EXPECT_TRUE(StatusIs(
      TensorRegion::Box(DType::kFloat32, shape, {0}, Shape({{"a", 4}})).status(),
      absl::StatusCode::kInvalidArgument, {"does not fit"}));
  EXPECT_TRUE(StatusIs(
      TensorRegion::Box(DType::kFloat32, shape, {-1, 0}, Shape({{"a", 1}, {"b", 8}})).status(),
      absl::StatusCode::kInvalidArgument, {"does not fit"}));
}

}  // namespace
}  // namespace meshrt
