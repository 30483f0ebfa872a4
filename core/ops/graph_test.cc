// Validation of graphs: each class of bad input gets InvalidArgument naming what is wrong.
#include "core/ops/graph.h"

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

v1::Graph ParseGraph(const std::string& text) {
  v1::Graph g;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &g)) << text;
  return g;
}

constexpr char kMlp[] = R"pb(
  ops { name: "x" type: "placeholder" shape { dims { name: "batch" size: 8 } dims { name: "d_in" size: 4 } } }
  ops { name: "w" type: "placeholder" shape { dims { name: "d_in" size: 4 } dims { name: "hidden" size: 6 } } }
  ops { name: "h" type: "einsum" inputs: "x" inputs: "w"
        shape { dims { name: "batch" size: 8 } dims { name: "hidden" size: 6 } } }
  ops { name: "r" type: "relu" inputs: "h" }
  ops { name: "s" type: "reduce_sum" inputs: "r" dims: "hidden" }
  outputs: "s"
)pb";

TEST(GraphTest, BuildsAndInfersShapes) {
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(ParseGraph(kMlp)));
  EXPECT_EQ(g.type("h").shape, Shape({{"batch", 8}, {"hidden", 6}}));
  EXPECT_EQ(g.type("s").shape, Shape({{"batch", 8}}));
  EXPECT_EQ(g.Placeholders(), (std::vector<std::string>{"x", "w"}));
  EXPECT_EQ(g.Outputs(), (std::vector<std::string>{"s"}));
}

TEST(GraphTest, FindTypeNamesAMissingTensor) {
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(ParseGraph(kMlp)));
  ASSERT_OK_AND_ASSIGN(const TensorType* h, g.FindType("h"));
  EXPECT_EQ(h->shape, Shape({{"batch", 8}, {"hidden", 6}}));
  EXPECT_TRUE(StatusIs(g.FindType("nope").status(), absl::StatusCode::kInvalidArgument,
                       {"no tensor 'nope'"}));
}

TEST(GraphTest, OpsMayBeListedInAnyOrder) {
  v1::Graph p = ParseGraph(kMlp);
  std::reverse(p.mutable_ops()->begin(), p.mutable_ops()->end());
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(p));
  const std::vector<int>& order = g.topological_order();
  auto pos = [&](const std::string& name) {
    for (size_t k = 0; k < order.size(); ++k) {
      if (g.op(order[k]).name() == name) return static_cast<int>(k);
    }
    return -1;
  };
  EXPECT_LT(pos("x"), pos("h"));
  EXPECT_LT(pos("h"), pos("r"));
  EXPECT_LT(pos("r"), pos("s"));
}

TEST(GraphTest, RepeatedDimInShape) {
  auto s = Graph::Build(ParseGraph(R"pb(
    ops { name: "x" type: "placeholder" shape { dims { name: "a" size: 2 } dims { name: "a" size: 2 } } })pb"));
  EXPECT_TRUE(StatusIs(s.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'x'", "repeats dim 'a'"}));
}

TEST(GraphTest, OneDimNameWithTwoSizes) {
  auto s = Graph::Build(ParseGraph(R"pb(
    ops { name: "x" type: "placeholder" shape { dims { name: "batch" size: 8 } } }
    ops { name: "y" type: "placeholder" shape { dims { name: "batch" size: 6 } } })pb"));
  EXPECT_TRUE(StatusIs(s.status(), absl::StatusCode::kInvalidArgument,
                       {"dim 'batch'", "size 8 in tensor 'x'", "size 6 in tensor 'y'"}));
}

TEST(GraphTest, UnknownOp) {
  auto s = Graph::Build(ParseGraph(R"pb(
    ops { name: "x" type: "placeholder" shape { dims { name: "a" size: 2 } } }
    ops { name: "y" type: "frobnicate" inputs: "x" })pb"));
  EXPECT_TRUE(StatusIs(s.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'y'", "unknown type 'frobnicate'", "einsum"}));
}

TEST(GraphTest, WrongInputCount) {
  auto s = Graph::Build(ParseGraph(R"pb(
    ops { name: "x" type: "placeholder" shape { dims { name: "a" size: 2 } } }
    ops { name: "y" type: "add" inputs: "x" })pb"));
  EXPECT_TRUE(StatusIs(s.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'y' (add)", "takes 2 input(s) but has 1"}));
}

TEST(GraphTest, DanglingInput) {
  auto s = Graph::Build(ParseGraph(R"pb(
    ops { name: "y" type: "relu" inputs: "ghost" })pb"));
  EXPECT_TRUE(StatusIs(s.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'y' (relu)", "reads 'ghost'", "no op"}));
}

TEST(GraphTest, Cycle) {
  auto s = Graph::Build(ParseGraph(R"pb(
    ops { name: "x" type: "placeholder" shape { dims { name: "a" size: 2 } } }
    ops { name: "p" type: "add" inputs: "x" inputs: "q" }
    ops { name: "q" type: "relu" inputs: "p" })pb"));
  EXPECT_TRUE(StatusIs(s.status(), absl::StatusCode::kInvalidArgument, {"cycle", "p", "q"}));
}

TEST(GraphTest, DuplicateAndMissingNames) {
  EXPECT_TRUE(StatusIs(Graph::Build(ParseGraph(R"pb(
    ops { name: "x" type: "placeholder" shape { dims { name: "a" size: 2 } } }
    ops { name: "x" type: "placeholder" shape { dims { name: "a" size: 2 } } })pb")).status(),
                       absl::StatusCode::kInvalidArgument, {"two ops are called 'x'"}));
  EXPECT_TRUE(StatusIs(Graph::Build(ParseGraph(R"pb(ops { type: "relu" })pb")).status(),
                       absl::StatusCode::kInvalidArgument, {"has no name"}));
}

TEST(GraphTest, BadOutputAndShapeErrors) {
  v1::Graph p = ParseGraph(kMlp);
  p.add_outputs("nope");
  EXPECT_TRUE(StatusIs(Graph::Build(p).status(), absl::StatusCode::kInvalidArgument,
                       {"output 'nope'"}));
  EXPECT_TRUE(StatusIs(Graph::Build(ParseGraph(R"pb(
    ops { name: "x" type: "placeholder" shape { dims { name: "a" size: 6 } } }
    ops { name: "y" type: "reshape" inputs: "x" shape { dims { name: "b" size: 4 } } })pb")).status(),
                       absl::StatusCode::kInvalidArgument, {"op 'y'", "cannot reshape"}));
  EXPECT_TRUE(StatusIs(Graph::Build(ParseGraph(R"pb(
    ops { name: "x" type: "placeholder" shape { dims { name: "a" size: 6 } } }
    ops { name: "y" type: "reduce_sum" inputs: "x" dims: "b" })pb")).status(),
                       absl::StatusCode::kInvalidArgument, {"op 'y'", "reduces dim 'b'"}));
}

// Layout validation happens before lowering emits anything.
TEST(LayoutValidationTest, TwoDimsOfOneTensorOnOneMeshDim) {
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(ParseGraph(kMlp)));
  ASSERT_OK_AND_ASSIGN(Mesh m, Mesh::Parse("rows:2,cols:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules r, LayoutRules::Parse("batch:rows,hidden:rows", m));
  EXPECT_TRUE(StatusIs(Lower(g, m, r).status(), absl::StatusCode::kInvalidArgument,
                       {"tensor 'h'", "made by op 'h', einsum", "'batch' and 'hidden'",
                        "mesh dim 'rows'"}));
}

TEST(LayoutValidationTest, SizeNotDivisible) {
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(ParseGraph(kMlp)));
  ASSERT_OK_AND_ASSIGN(Mesh m, Mesh::Parse("cols:4"));
  ASSERT_OK_AND_ASSIGN(LayoutRules r, LayoutRules::Parse("hidden:cols", m));
  EXPECT_TRUE(StatusIs(ValidateLayouts(g, m, r), absl::StatusCode::kInvalidArgument,
                       {"tensor 'w'", "'hidden' of size 6", "mesh dim 'cols' of size 4",
                        "pad hidden to 8"}));
}

TEST(BuilderTest, RemembersFirstError) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 2}}));
  TensorRef y = b.Placeholder("y", Shape({{"a", 3}}));
  TensorRef z = b.Add(x, y, "z");  // a:2 vs a:3
  b.Relu(z);
  EXPECT_TRUE(StatusIs(b.Build().status(), absl::StatusCode::kInvalidArgument,
                       {"op 'z' (add)", "dim 'a' is 2 in 'x' but 3 in 'y'"}));
}

TEST(BuilderTest, NamesOpsAndMarksOutputs) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 2}, {"b", 3}}));
  TensorRef r = b.Relu(x);
  TensorRef s = b.ReduceMean(r, {"b"});
  TensorRef n = b.RenameDim(s, "a", "c");
  b.MarkOutput(n);
  EXPECT_EQ(r.name, "relu_0");
  EXPECT_EQ(s.shape, Shape({{"a", 2}}));
  EXPECT_EQ(n.shape, Shape({{"c", 2}}));
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  EXPECT_EQ(g.Outputs(), (std::vector<std::string>{n.name}));
}

TEST(BuilderTest, NameScopesNameOpsButNotVariablesOrPlaceholders) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 2}, {"b", 3}}));
  TensorRef top = b.Relu(x);
  TensorRef r1, r2, named, w, inner, again;
  {
    auto layer = b.NameScope("layer_0");
    EXPECT_EQ(b.name_scope(), "layer_0/");
    w = b.Variable("layer_0/w", Shape({{"b", 3}}));  // as given: checkpoints name it
    {
      auto ffn = b.NameScope("ffn");
      r1 = b.Relu(x);
      r2 = b.Relu(r1);
      named = b.Mul(r2, w, "gate");
      {
        auto grad = b.NameScopeAt("gate/grad");  // replaces, not nests
        inner = b.Neg(named);
      }
      EXPECT_EQ(b.name_scope(), "layer_0/ffn/");
    }
  }
  EXPECT_EQ(b.name_scope(), "");
  again = b.Relu(x);
  EXPECT_EQ(top.name, "relu_0");
  EXPECT_EQ(w.name, "layer_0/w");
  EXPECT_EQ(r1.name, "layer_0/ffn/relu");
  EXPECT_EQ(r2.name, "layer_0/ffn/relu_1");
  EXPECT_EQ(named.name, "layer_0/ffn/gate");
  EXPECT_EQ(inner.name, "gate/grad/neg");
  EXPECT_EQ(again.name, "relu_1");
  ASSERT_OK(b.Build().status());
  // A scoped name taken already is an error naming it, as any duplicate.
  GraphBuilder c;
  TensorRef y = c.Placeholder("y", Shape({{"a", 2}}));
  c.Relu(y, "s/r");
  {
    auto s = c.NameScope("s");
    c.Relu(y, "r");
  }
  EXPECT_TRUE(StatusIs(c.Build().status(), absl::StatusCode::kInvalidArgument,
                       {"two ops are called 's/r'"}));
}

}  // namespace
}  // namespace meshrt
