#include "bench/gemm_floor.h"

#include <utility>

#include "bench/sgd_for_tests.h"
#include "bench/train_flops.h"
#include "core/ir/mesh.h"
#include "core/lowering/lowering.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "models/train.h"
#include "util/status_macros.h"

namespace meshrt {
namespace bench {
namespace {

absl::StatusOr<std::map<GemmShape, int64_t>> GemmsOf(const models::TrainGraph& tg,
                                                     const std::string& mesh_text,
                                                     const std::string& layout) {
  ASSIGN_OR_RETURN(const Mesh mesh, Mesh::Parse(mesh_text));
  ASSIGN_OR_RETURN(const LayoutRules rules, LayoutRules::Parse(layout, mesh));
  ASSIGN_OR_RETURN(const v1::Program program, Lower(tg.graph, mesh, rules));
  return ProgramGemms(program, {tg.loss});
}

double Flops(const std::map<GemmShape, int64_t>& gemms) {
  double f = 0;
  for (const auto& [shape, count] : gemms) f += count * shape.Flops();
  return f;
}

GemmShape Canonical(GemmShape s) {
  if (s.m > s.n) std::swap(s.m, s.n);
  return s;
}

models::MlpOptions Mlp(bool input_gradient) {
  models::MlpOptions m;
  m.biases = true;
  m.fixed_data = true;
  m.input_gradient = input_gradient;
  return m;
}

// Data parallel on two processors: each runs the five products of the MLP step on half the
// batch, as plain (m x k)(k x n) products with no batch dim.
TEST(GemmFloorTest, MlpDataParallelProductsAreTheStepsFiveOnHalfTheBatch) {
  const models::MlpOptions m = Mlp(false);  // batch 256, d_model 1024, d_ff 4096
  ASSERT_OK_AND_ASSIGN(models::TrainGraph tg, models::BuildMlpTrainGraph(m, Sgd()));
  ASSERT_OK_AND_ASSIGN(auto gemms, GemmsOf(tg, "x:2", "batch:x"));
  // Which operand is "m" depends on the einsum's operand order: compare with m <= n.
  const std::map<GemmShape, int64_t> want = {
      {{1, 128, 4096, 1024}, 2},  // x w1, and dh = dy w2^T
      {{1, 128, 1024, 4096}, 1},  // h w2
      {{1, 1024, 4096, 128}, 2},  // dw1 = x^T dh, dw2 = h^T dy
  };
  std::map<GemmShape, int64_t> got;
  for (const auto& [shape, count] : gemms) got[Canonical(shape)] += count;
  EXPECT_EQ(got, want);
  EXPECT_DOUBLE_EQ(Flops(gemms), MlpStepFlops(m) / 2);
}

// The products of every layout add up to the analytic FLOPs of the step divided over the
// processors that split them: the floor counts the work the step really does.
TEST(GemmFloorTest, ProductsOfEveryLayoutAddUpToTheStepsFlops) {
  const models::MlpOptions mp = Mlp(true);
  ASSERT_OK_AND_ASSIGN(models::TrainGraph mlp, models::BuildMlpTrainGraph(mp, Sgd()));
  ASSERT_OK_AND_ASSIGN(auto mlp_mp, GemmsOf(mlp, "x:2", "d_ff:x"));
  EXPECT_DOUBLE_EQ(Flops(mlp_mp), MlpStepFlops(mp) / 2);

  models::TransformerOptions o = models::BenchConfig();
  o.layers = 1;
  ASSERT_OK_AND_ASSIGN(models::TrainGraph tf, models::BuildTransformerTrainGraph(o, Sgd()));
  const double step = TransformerStepFlops(o) + TransformerEmbeddingFlops(o);
  ASSERT_OK_AND_ASSIGN(auto dp, GemmsOf(tf, "x:2", "batch:x"));
  EXPECT_DOUBLE_EQ(Flops(dp), step / 2);
  ASSERT_OK_AND_ASSIGN(auto dpmp, GemmsOf(tf, "rows:2,cols:2",
                                          "batch:rows,heads:cols,d_ff:cols,vocab:cols"));
  // The embedding's one-hot product splits only over rows (vocab is split, d_model is not:
  // each column processor multiplies its vocab slice), so everything divides by four.
  EXPECT_DOUBLE_EQ(Flops(dpmp), step / 4);
}

// Attention's scores are batched over batch and heads: batch x (length x d_kv)(d_kv x memory).
TEST(GemmFloorTest, AttentionScoresAreBatchedOverBatchAndHeads) {
  models::TransformerOptions o = models::BenchConfig();  // batch 32, length 128, 8 heads x 32
  o.layers = 1;
  ASSERT_OK_AND_ASSIGN(models::TrainGraph tf, models::BuildTransformerTrainGraph(o, Sgd()));
  ASSERT_OK_AND_ASSIGN(auto mp, GemmsOf(tf, "x:2", "heads:x,d_ff:x,vocab:x"));
  const GemmShape scores{32 * 4, 128, 128, 32};  // the forward scores (and the values' gradient)
  ASSERT_TRUE(mp.count(scores));
  EXPECT_EQ(mp.at(scores), 2);
}

}  // namespace
}  // namespace bench
}  // namespace meshrt
