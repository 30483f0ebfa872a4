#include "core/ir/slicing.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

Tensor IotaFloat(Shape shape) {
  std::vector<float> v(shape.num_elements());
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::Float(std::move(shape), std::move(v));
}

Tensor IotaInt(Shape shape) {
  std::vector<int32_t> v(shape.num_elements());
  std::iota(v.begin(), v.end(), 0);
  return Tensor::Int(std::move(shape), std::move(v));
}

Mesh MakeMesh(const char* text) { return *Mesh::Parse(text); }

TEST(SliceAlongAxisTest, EachAxisOfARank3Tensor) {
  // [a:2, b:4, c:3]: element (i, j, k) = 12 i + 3 j + k.
  const Tensor t = IotaFloat(Shape{{"a", 2}, {"b", 4}, {"c", 3}});

  Tensor a1 = SliceAlongAxis(t, 0, 2, 1);
  EXPECT_EQ(a1.shape(), (Shape{{"a", 1}, {"b", 4}, {"c", 3}}));
  EXPECT_THAT(a1.floats(), ElementsAre(12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23));

  Tensor b1 = SliceAlongAxis(t, 1, 2, 1);
  EXPECT_EQ(b1.shape(), (Shape{{"a", 2}, {"b", 2}, {"c", 3}}));
  EXPECT_THAT(b1.floats(), ElementsAre(6, 7, 8, 9, 10, 11, 18, 19, 20, 21, 22, 23));

  Tensor c2 = SliceAlongAxis(t, 2, 3, 2);
  EXPECT_EQ(c2.shape(), (Shape{{"a", 2}, {"b", 4}, {"c", 1}}));
  EXPECT_THAT(c2.floats(), ElementsAre(2, 5, 8, 11, 14, 17, 20, 23));

  Tensor whole = SliceAlongAxis(t, 1, 1, 0);
  EXPECT_EQ(whole.shape(), t.shape());
  EXPECT_THAT(whole.floats(), ElementsAreArray(t.floats()));
}

TEST(SliceAlongAxisTest, Int32) {
  const Tensor t = IotaInt(Shape{{"x", 3}, {"y", 4}});
  Tensor s = SliceAlongAxis(t, 1, 4, 3);
  EXPECT_EQ(s.dtype(), DType::kInt32);
  EXPECT_THAT(s.ints(), ElementsAre(3, 7, 11));
}

TEST(ConcatAlongAxisTest, ConcatenatesInOrder) {
  const Tensor p = Tensor::Float(Shape{{"a", 2}, {"b", 1}}, {1, 2});
  const Tensor q = Tensor::Float(Shape{{"a", 2}, {"b", 2}}, {10, 11, 20, 21});
  Tensor c = ConcatAlongAxis({&p, &q}, 1);
  EXPECT_EQ(c.shape(), (Shape{{"a", 2}, {"b", 3}}));
  EXPECT_THAT(c.floats(), ElementsAre(1, 10, 11, 2, 20, 21));

  Tensor r = ConcatAlongAxis({&q, &q}, 0);
  EXPECT_EQ(r.shape(), (Shape{{"a", 4}, {"b", 2}}));
  EXPECT_THAT(r.floats(), ElementsAre(10, 11, 20, 21, 10, 11, 20, 21));
}

TEST(ConcatAlongAxisTest, InvertsSliceAlongEveryAxis) {
  const Tensor t = IotaInt(Shape{{"a", 2}, {"b", 6}, {"c", 4}});
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t parts = t.shape().dim(axis).size;
    std::vector<Tensor> pieces;
    for (int64_t k = 0; k < parts; ++k) pieces.push_back(SliceAlongAxis(t, axis, parts, k));
    std::vector<const Tensor*> ptrs;
    for (const Tensor& p : pieces) ptrs.push_back(&p);
    Tensor back = ConcatAlongAxis(ptrs, axis);
    EXPECT_EQ(back.shape(), t.shape()) << "axis " << axis;
    EXPECT_THAT(back.ints(), ElementsAreArray(t.ints())) << "axis " << axis;
  }
}

TEST(ChunksTest, SplitIntoChunksPacksPiecesContiguously) {
  // [a:2, b:4] = {0 1 2 3 / 4 5 6 7}; two pieces along b: {0 1 / 4 5}, {2 3 / 6 7}.
  const Tensor t = IotaFloat(Shape{{"a", 2}, {"b", 4}});
  std::vector<float> out(8, -1);
  SplitIntoChunks(t, 1, 2, out.data());
  EXPECT_THAT(out, ElementsAre(0, 1, 4, 5, 2, 3, 6, 7));
  SplitIntoChunks(t, 0, 2, out.data());
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST(ChunksTest, ConcatChunksInvertsSplit) {
  const Tensor t = IotaInt(Shape{{"a", 3}, {"b", 4}, {"c", 2}});
  std::vector<int32_t> packed(t.num_elements());
  SplitIntoChunks(t, 1, 4, packed.data());
  Tensor back =
      ConcatChunks(packed.data(), DType::kInt32, Shape{{"a", 3}, {"b", 1}, {"c", 2}}, 4, 1);
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_THAT(back.ints(), ElementsAreArray(t.ints()));

  // Chunks concatenated along a different axis than they were split on.
  const std::vector<float> chunks = {1, 2, 3, 4, 5, 6, 7, 8};  // two chunks of [x:2, y:2]
  Tensor c = ConcatChunks(chunks.data(), DType::kFloat32, Shape{{"x", 2}, {"y", 2}}, 2, 1);
  EXPECT_EQ(c.shape(), (Shape{{"x", 2}, {"y", 4}}));
  EXPECT_THAT(c.floats(), ElementsAre(1, 2, 5, 6, 3, 4, 7, 8));
}

TEST(ChunksTest, IntoFormsWriteWhatTheTensorFormsReturnOnEveryAxis) {
  // Odd sizes, both dtypes; the destinations start poisoned, so an unwritten element shows.
  const Tensor ti = IotaInt(Shape{{"a", 3}, {"b", 6}, {"c", 5}});
  const Tensor tf = IotaFloat(Shape{{"a", 3}, {"b", 6}, {"c", 5}});
  for (const Tensor* t : {&ti, &tf}) {
    for (int axis = 0; axis < 3; ++axis) {
      const int64_t parts = t->shape().dim(axis).size;
      for (int64_t k = 0; k < parts; ++k) {
        const Tensor want = SliceAlongAxis(*t, axis, parts, k);
        std::vector<int32_t> got(want.num_elements(), -7);
        SliceAlongAxisInto(*t, axis, parts, k, got.data());
        EXPECT_EQ(std::memcmp(got.data(), TensorData(want), TensorBytes(want)), 0)
            << "axis " << axis << " piece " << k;
      }
      std::vector<int32_t> packed(t->num_elements());
      SplitIntoChunks(*t, axis, parts, packed.data());
      const Shape chunk = WithDimSize(t->shape(), axis, 1);
      std::vector<int32_t> back(t->num_elements(), -7);
      ConcatChunksInto(packed.data(), t->dtype(), chunk, parts, axis, back.data());
      EXPECT_EQ(std::memcmp(back.data(), TensorData(*t), TensorBytes(*t)), 0) << "axis " << axis;
    }
  }
}

TEST(ChunksTest, ChunksAreContiguousExactlyWhenEveryEarlierDimHasSizeOne) {
  const Shape s{{"one", 1}, {"a", 4}, {"b", 6}};
  EXPECT_TRUE(ChunksAreContiguous(s, 0));
  EXPECT_TRUE(ChunksAreContiguous(s, 1));
  EXPECT_FALSE(ChunksAreContiguous(s, 2));
  // Where it says so, SplitIntoChunks is the identity.
  const Tensor t = IotaInt(s);
  std::vector<int32_t> packed(t.num_elements());
  SplitIntoChunks(t, 1, 2, packed.data());
  EXPECT_THAT(packed, ElementsAreArray(t.ints()));
  SplitIntoChunks(t, 2, 2, packed.data());
  EXPECT_THAT(packed, ::testing::Not(ElementsAreArray(t.ints())));
}

TEST(ExtractSliceTest, TwoDimsOnTwoMeshDims) {
  // [a:4, b:6], element (i, j) = 6 i + j; a over rows:2, b over cols:3.
  const Tensor whole = IotaFloat(Shape{{"a", 4}, {"b", 6}});
  const Mesh mesh = MakeMesh("rows:2,cols:3");
  const TensorLayout layout{{0, 1}};
  Tensor s = ExtractSlice(whole, layout, mesh, {1, 2});
  EXPECT_EQ(s.shape(), (Shape{{"a", 2}, {"b", 2}}));
  EXPECT_THAT(s.floats(), ElementsAre(16, 17, 22, 23));
  Tensor s0 = ExtractSlice(whole, layout, mesh, {0, 1});
  EXPECT_THAT(s0.floats(), ElementsAre(2, 3, 8, 9));
}

TEST(ExtractSliceTest, TransposedAxesAndReplication) {
  // a over cols (axis 1), b replicated: the rows coordinate does not matter.
  const Tensor whole = IotaInt(Shape{{"a", 4}, {"b", 2}});
  const Mesh mesh = MakeMesh("rows:2,cols:2");
  const TensorLayout layout{{1, kReplicated}};
  Tensor s = ExtractSlice(whole, layout, mesh, {0, 1});
  EXPECT_EQ(s.shape(), (Shape{{"a", 2}, {"b", 2}}));
  EXPECT_THAT(s.ints(), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(ExtractSlice(whole, layout, mesh, {1, 1}).ints(), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(ExtractSlice(whole, layout, mesh, {1, 0}).ints(), ElementsAre(0, 1, 2, 3));
}

TEST(ExtractSliceTest, ScalarAndFullyReplicated) {
  const Mesh mesh = MakeMesh("x:2");
  const Tensor scalar = Tensor::Float(Shape{}, {7.5f});
  Tensor s = ExtractSlice(scalar, TensorLayout{}, mesh, {1});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_THAT(s.floats(), ElementsAre(7.5f));
  const Tensor v = IotaFloat(Shape{{"n", 3}});
  EXPECT_THAT(ExtractSlice(v, TensorLayout{{kReplicated}}, mesh, {1}).floats(),
              ElementsAre(0, 1, 2));
}

TEST(InsertSliceTest, ReassemblesEveryLayoutOnA3DMesh) {
  const Mesh mesh = MakeMesh("x:2,y:2,z:2");
  const Tensor whole = IotaFloat(Shape{{"a", 4}, {"b", 2}, {"c", 6}});
  const std::vector<TensorLayout> layouts = {
      {{0, 1, 2}}, {{2, kReplicated, 0}}, {{kReplicated, 0, 1}}, {{kReplicated, -1, -1}}};
  for (const TensorLayout& layout : layouts) {
    Tensor back(DType::kFloat32, whole.shape());
    for (int p = 0; p < mesh.num_processors(); ++p) {
      const std::vector<int64_t> coord = mesh.Coordinate(p);
      ASSERT_TRUE(
          InsertSlice(ExtractSlice(whole, layout, mesh, coord), layout, mesh, coord, &back).ok());
    }
    EXPECT_THAT(back.floats(), ElementsAreArray(whole.floats()))
        << layout.ToString(whole.shape(), mesh);
  }
}

TEST(InsertSliceTest, PlacesOneSlice) {
  const Mesh mesh = MakeMesh("rows:2,cols:2");
  Tensor whole(DType::kInt32, Shape{{"a", 2}, {"b", 4}});
  const Tensor slice = Tensor::Int(Shape{{"a", 1}, {"b", 2}}, {5, 6});
  ASSERT_TRUE(InsertSlice(slice, TensorLayout{{0, 1}}, mesh, {1, 1}, &whole).ok());
  EXPECT_THAT(whole.ints(), ElementsAre(0, 0, 0, 0, 0, 0, 5, 6));
}

TEST(InsertSliceTest, RejectsMismatches) {
  const Mesh mesh = MakeMesh("rows:2,cols:2");
  Tensor whole(DType::kFloat32, Shape{{"a", 2}, {"b", 4}});
  const Tensor good = Tensor::Float(Shape{{"a", 1}, {"b", 2}}, {1, 2});

  absl::Status wrong_shape = InsertSlice(Tensor(DType::kFloat32, Shape{{"a", 2}, {"b", 2}}),
                                         TensorLayout{{0, 1}}, mesh, {0, 0}, &whole);
  EXPECT_EQ(wrong_shape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong_shape.message()), HasSubstr("[a:1, b:2]"));

  absl::Status wrong_dtype = InsertSlice(Tensor::Int(Shape{{"a", 1}, {"b", 2}}, {1, 2}),
                                         TensorLayout{{0, 1}}, mesh, {0, 0}, &whole);
  EXPECT_EQ(wrong_dtype.code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(InsertSlice(good, TensorLayout{{0, 1}}, mesh, {0, 2}, &whole).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InsertSlice(good, TensorLayout{{0, 0}}, mesh, {0, 0}, &whole).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InsertSlice(good, TensorLayout{{0}}, mesh, {0, 0}, &whole).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(whole.floats(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));
}

}  // namespace
}  // namespace meshrt
