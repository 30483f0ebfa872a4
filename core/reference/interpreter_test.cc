#include "core/reference/interpreter.h"

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/planning/explain.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

TEST(InterpreterTest, TinyMlpByHand) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 2}, {"d_in", 2}}));
  TensorRef w = b.Placeholder("w", Shape({{"d_in", 2}, {"hidden", 2}}));
  TensorRef h = b.Relu(b.Einsum({x, w}, Shape({{"batch", 2}, {"hidden", 2}}), "h"), "r");
  TensorRef s = b.ReduceSum(h, {"hidden"}, "s");
  TensorRef m = b.ReduceMean(h, {"batch"}, "m");
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  TensorMap feeds;
  feeds["x"] = Tensor::Float(x.shape, {1, 2, 3, 4});
  feeds["w"] = Tensor::Float(w.shape, {1, -1, 1, -2});
  // h = [[1+2, -1-4], [3+4, -3-8]] = [[3, -5], [7, -11]]; relu -> [[3, 0], [7, 0]].
  ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(g, feeds, {"h", "r", "s", "m"}));
  EXPECT_EQ(out["h"].floats(), absl::MakeConstSpan(std::vector<float>{3, -5, 7, -11}));
  EXPECT_EQ(out["r"].floats(), absl::MakeConstSpan(std::vector<float>{3, 0, 7, 0}));
  EXPECT_EQ(out["s"].floats(), absl::MakeConstSpan(std::vector<float>{3, 7}));
  EXPECT_EQ(out["m"].floats(), absl::MakeConstSpan(std::vector<float>{5, 0}));
  EXPECT_EQ(out.size(), 4u);
}

TEST(InterpreterTest, FeedErrorsNameThePlaceholder) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 2}}));
  b.Relu(x);
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  EXPECT_TRUE(StatusIs(Interpret(g, {}).status(), absl::StatusCode::kInvalidArgument,
                       {"placeholder 'x'", "not fed"}));
  TensorMap wrong_shape{{"x", Tensor::Float(Shape({{"a", 3}}), {1, 2, 3})}};
  EXPECT_TRUE(StatusIs(Interpret(g, wrong_shape).status(), absl::StatusCode::kInvalidArgument,
                       {"feed 'x'", "[a:3]", "[a:2]"}));
  TensorMap wrong_dtype{{"x", Tensor::Int(Shape({{"a", 2}}), {1, 2})}};
  EXPECT_TRUE(StatusIs(Interpret(g, wrong_dtype).status(), absl::StatusCode::kInvalidArgument,
                       {"feed 'x'", "int32"}));
  TensorMap unknown{{"x", Tensor::Float(Shape({{"a", 2}}), {1, 2})},
                    {"y", Tensor::Float(Shape({{"a", 2}}), {1, 2})}};
  EXPECT_TRUE(StatusIs(Interpret(g, unknown).status(), absl::StatusCode::kInvalidArgument,
                       {"feed 'y'", "names no placeholder"}));
  TensorMap ok{{"x", Tensor::Float(Shape({{"a", 2}}), {1, 2})}};
  EXPECT_TRUE(StatusIs(Interpret(g, ok, {"nope"}).status(), absl::StatusCode::kInvalidArgument,
                       {"fetch 'nope'"}));
}

TEST(InterpreterTest, ConstantsAndRenames) {
  GraphBuilder b;
  TensorRef c = b.Constant(Tensor::Float(Shape({{"a", 3}}), {1, 2, 3}), "c");
  TensorRef e = b.Scale(b.Neg(c), 2.0f, "e");
  TensorRef r = b.Reshape(b.RenameDim(e, "a", "z"), Shape({{"z", 3}, {"one", 1}}), "r");
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(g, {}, {"r"}));
  EXPECT_EQ(out["r"].shape(), r.shape);
  EXPECT_EQ(out["r"].floats(), absl::MakeConstSpan(std::vector<float>{-2, -4, -6}));
}

TEST(ExplainTest, NamesCollectivesMeshDimsAndBytes) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w = b.Placeholder("w", Shape({{"d_in", 16}, {"hidden", 32}}));
  b.Einsum({x, w}, Shape({{"batch", 8}, {"hidden", 32}}), "h");
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  ASSERT_OK_AND_ASSIGN(Mesh m, Mesh::Parse("rows:2,cols:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules r, LayoutRules::Parse("batch:rows,d_in:cols", m));
  ASSERT_OK_AND_ASSIGN(v1::Program p, Lower(g, m, r));
  std::string text = ExplainProgram(p);
  // h's slice is [batch:4, hidden:32] = 512 B; a ring allreduce over 2 sends 512 B per worker.
  EXPECT_NE(text.find("allreduce sum"), std::string::npos) << text;
  EXPECT_NE(text.find("over cols"), std::string::npos) << text;
  EXPECT_NE(text.find("512 B sent per worker"), std::string::npos) << text;
  EXPECT_NE(text.find("[batch:rows, d_in:cols]"), std::string::npos) << text;
  EXPECT_NE(text.find("total: 1 communication step(s), 512 bytes"), std::string::npos) << text;
}

}  // namespace
}  // namespace meshrt
