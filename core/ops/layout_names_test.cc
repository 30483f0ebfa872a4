#include "core/ops/layout_names.h"

#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// x [batch, d_model] times w [d_model, d_ff]; a while_loop-free graph is enough for the names.
Graph Mlp() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 4}, {"d_model", 6}}));
  TensorRef w = b.Variable("w", Shape({{"d_model", 6}, {"d_ff", 8}}));
  b.MarkOutput(b.Einsum({x, w}, Shape({{"batch", 4}, {"d_ff", 8}}), "h"));
  return b.Build().value();
}

TEST(LayoutNamesTest, CollectsEveryDimOfEveryTensor) {
  EXPECT_EQ(GraphDimNames(Mlp()), (std::set<std::string>{"batch", "d_ff", "d_model"}));
}

TEST(LayoutNamesTest, ClosestNameCatchesTyposButNotStrangers) {
  const std::set<std::string> names = {"batch", "d_ff", "d_model", "heads", "vocab"};
  EXPECT_EQ(ClosestName("batchh", names), "batch");    // an extra letter
  EXPECT_EQ(ClosestName("btach", names), "batch");     // two letters swapped
  EXPECT_EQ(ClosestName("Heads", names), "heads");     // case
  EXPECT_EQ(ClosestName("d_modle", names), "d_model");
  EXPECT_EQ(ClosestName("dff", names), "d_ff");
  EXPECT_EQ(ClosestName("sequence", names), "");       // nothing close
  EXPECT_EQ(ClosestName("x", {}), "");
}

TEST(LayoutNamesTest, ARuleForADimNoTensorHasIsAnErrorWithASuggestion) {
  const Graph g = Mlp();
  const Mesh mesh = *Mesh::Parse("rows:2,cols:2");
  ASSERT_OK(CheckRulesNameGraphDims(g, *LayoutRules::Parse("batch:rows,d_ff:cols", mesh)));
  ASSERT_OK(CheckRulesNameGraphDims(g, *LayoutRules::Parse("", mesh)));
  EXPECT_TRUE(StatusIs(CheckRulesNameGraphDims(g, *LayoutRules::Parse("batchh:rows", mesh)),
                       absl::StatusCode::kInvalidArgument,
                       {"layout rule 'batchh:rows'", "names dim 'batchh'",
                        "no tensor of the graph has", "did you mean 'batch'?"}));
  // Nothing close: the graph's dims are listed instead.
  EXPECT_TRUE(StatusIs(
      CheckRulesNameGraphDims(g, *LayoutRules::Parse("batch:rows,sequence:cols", mesh)),
      absl::StatusCode::kInvalidArgument,
      {"'sequence:cols'", "(its dims: batch, d_ff, d_model)"}));
}

}  // namespace
}  // namespace meshrt
