#include "core/ir/mesh.h"

#include "core/ir/shape.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

TEST(ShapeTest, ParsesAndPrints) {
  ASSERT_OK_AND_ASSIGN(Shape s, Shape::Parse("batch:8, d_model:16"));
  EXPECT_EQ(s.rank(), 2);
  EXPECT_EQ(s.num_elements(), 128);
  EXPECT_EQ(s.IndexOf("d_model"), 1);
  EXPECT_EQ(s.Strides(), (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(s.ToString(), "[batch:8, d_model:16]");
  ASSERT_OK_AND_ASSIGN(Shape scalar, Shape::Parse(""));
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.num_elements(), 1);
}

TEST(ShapeTest, RefusesRepeatedDimAndBadSizes) {
  EXPECT_TRUE(StatusIs(Shape::Parse("a:2,a:2").status(), absl::StatusCode::kInvalidArgument,
                       {"repeats dim 'a'"}));
  EXPECT_TRUE(StatusIs(Shape::Parse("a:0").status(), absl::StatusCode::kInvalidArgument,
                       {"'a' has size 0"}));
  EXPECT_TRUE(StatusIs(Shape::Parse("a=3").status(), absl::StatusCode::kInvalidArgument,
                       {"expected name:size"}));
}

// Element counts never wrap: Make refuses a shape past Shape::kMaxElements (2^59), and
// CheckedNumElements refuses one built unchecked.
TEST(ShapeTest, ElementCountOverflowIsRefused) {
  ASSERT_OK_AND_ASSIGN(Shape at, Shape::Make({{"a", int64_t{1} << 29}, {"b", int64_t{1} << 30}}));
  EXPECT_EQ(at.num_elements(), Shape::kMaxElements);
  EXPECT_TRUE(StatusIs(
      Shape::Make({{"a", int64_t{1} << 29}, {"b", (int64_t{1} << 30) + 1}}, "tensor 't'").status(),
      absl::StatusCode::kInvalidArgument, {"tensor 't'", "passes 576460752303423488 at dim 'b'"}));
  // 2^32 * 2^32 would wrap to 0 in int64.
  EXPECT_TRUE(StatusIs(Shape::Parse("a:4294967296,b:4294967296").status(),
                       absl::StatusCode::kInvalidArgument, {"at dim 'b'"}));
  v1::Shape proto;
  for (const char* name : {"a", "b", "c"}) {  // 2^120 would wrap to 0
    v1::Dim* d = proto.add_dims();
    d->set_name(name);
    d->set_size(int64_t{1} << 40);
  }
  EXPECT_TRUE(StatusIs(Shape::FromProto(proto, "feed 'x'").status(),
                       absl::StatusCode::kInvalidArgument, {"feed 'x'", "at dim 'b'"}));
  const Shape unchecked({{"a", int64_t{1} << 40}, {"b", int64_t{1} << 40}});
  EXPECT_TRUE(StatusIs(unchecked.CheckedNumElements("tensor 'u'").status(),
                       absl::StatusCode::kInvalidArgument, {"tensor 'u'", "at dim 'b'"}));
  ASSERT_OK_AND_ASSIGN(int64_t n, Shape({{"a", 3}, {"b", 5}}).CheckedNumElements());
  EXPECT_EQ(n, 15);
}

// A mesh's processor count fits in an int: 2^32 processors (once cast to 0) are refused at
// parse and FromProto, and so is a product that would overflow int64.
TEST(MeshTest, ProcessorCountOverflowIsRefused) {
  ASSERT_OK_AND_ASSIGN(Mesh max, Mesh::Parse("a:2147483647"));
  EXPECT_EQ(max.num_processors(), Mesh::kMaxProcessors);
  EXPECT_TRUE(StatusIs(Mesh::Parse("rows:65536,cols:65536").status(),
                       absl::StatusCode::kInvalidArgument,
                       {"mesh", "at dim 'cols'", "at most 2147483647 processors"}));
  v1::Mesh proto;
  for (const char* name : {"a", "b"}) {  // 2^64 would wrap to 0
    v1::Dim* d = proto.add_dims();
    d->set_name(name);
    d->set_size(int64_t{1} << 32);
  }
  EXPECT_TRUE(StatusIs(Mesh::FromProto(proto).status(), absl::StatusCode::kInvalidArgument,
                       {"at dim 'a'"}));
}

TEST(MeshTest, CoordinatesAreRowMajor) {
  ASSERT_OK_AND_ASSIGN(Mesh m, Mesh::Parse("rows:2,cols:3"));
  EXPECT_EQ(m.num_processors(), 6);
  EXPECT_EQ(m.Coordinate(4), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(m.ProcessorNumber({1, 2}), 5);
  // Row group (over cols) of processor 4 is {3,4,5}; column group (over rows) is {1,4}.
  EXPECT_EQ(m.GroupMembers({1}, m.Coordinate(4)), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(m.GroupMembers({0}, m.Coordinate(4)), (std::vector<int>{1, 4}));
  EXPECT_EQ(m.RankInGroup({1}, m.Coordinate(4)), 1);
  EXPECT_EQ(m.RankInGroup({0, 1}, m.Coordinate(4)), 4);
  EXPECT_EQ(m.GroupSize({0, 1}), 6);
}

TEST(LayoutRulesTest, ParsesAndLaysOut) {
  ASSERT_OK_AND_ASSIGN(Mesh m, Mesh::Parse("rows:2,cols:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules r, LayoutRules::Parse("batch:rows,hidden:cols", m));
  Shape s({{"batch", 8}, {"d_in", 4}, {"hidden", 6}});
  TensorLayout l = r.LayoutFor(s);
  EXPECT_EQ(l.mesh_axis, (std::vector<int>{0, kReplicated, 1}));
  EXPECT_EQ(l.ToString(s, m), "[batch:rows, d_in:-, hidden:cols]");
  EXPECT_EQ(SliceShape(s, l, m), Shape({{"batch", 4}, {"d_in", 4}, {"hidden", 3}}));
  EXPECT_EQ(SliceBegin(s, l, m, {1, 1}), (std::vector<int64_t>{4, 0, 3}));
}

TEST(LayoutRulesTest, RefusesUnknownMeshDim) {
  ASSERT_OK_AND_ASSIGN(Mesh m, Mesh::Parse("rows:2,cols:2"));
  EXPECT_TRUE(StatusIs(LayoutRules::Parse("batch:tiles", m).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"batch:tiles", "unknown mesh dim 'tiles'", "rows, cols"}));
  EXPECT_TRUE(StatusIs(LayoutRules::Parse("batch:rows,batch:cols", m).status(),
                       absl::StatusCode::kInvalidArgument, {"'batch' to two mesh dims"}));
}

TEST(CheckLayoutTest, TwoDimsOnOneMeshDim) {
  ASSERT_OK_AND_ASSIGN(Mesh m, Mesh::Parse("rows:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules r, LayoutRules::Parse("a:rows,b:rows", m));
  Shape s({{"a", 4}, {"b", 4}});
  EXPECT_TRUE(StatusIs(CheckLayout(s, r.LayoutFor(s), m, "t", "t", "einsum"),
                       absl::StatusCode::kInvalidArgument,
                       {"tensor 't'", "made by op 't', einsum", "'a' and 'b'", "mesh dim 'rows'",
                        "map one of them"}));
}

TEST(CheckLayoutTest, NotDivisibleSuggestsPadding) {
  ASSERT_OK_AND_ASSIGN(Mesh m, Mesh::Parse("cols:4"));
  ASSERT_OK_AND_ASSIGN(LayoutRules r, LayoutRules::Parse("vocab:cols", m));
  Shape s({{"vocab", 50257}});
  EXPECT_TRUE(StatusIs(CheckLayout(s, r.LayoutFor(s), m, "logits", "proj"),
                       absl::StatusCode::kInvalidArgument,
                       {"'logits'", "'proj'", "'vocab' of size 50257",
                        "map vocab to nothing, or pad vocab to 50260"}));
  Shape ok({{"vocab", 8}});
  EXPECT_TRUE(CheckLayout(ok, r.LayoutFor(ok), m, "x", "x").ok());
}

}  // namespace
}  // namespace meshrt
