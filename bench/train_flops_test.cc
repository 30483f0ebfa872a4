#include "bench/train_flops.h"

#include "bench/sgd_for_tests.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "models/train.h"

namespace meshrt {
namespace bench {
namespace {

// The peer README's figure for its default configuration, and the model-scale one's.
TEST(TrainFlopsTest, ReproducesThePeersFigures) {
  EXPECT_NEAR(TransformerStepFlops(models::BenchConfig()) / 1e9, 43.5, 0.05);
  EXPECT_NEAR(TransformerStepFlops(models::ModelScaleBenchConfig()) / 1e9, 169.1, 0.05);
  models::MlpOptions mlp;
  mlp.input_gradient = true;
  EXPECT_NEAR(MlpStepFlops(mlp) / 1e9, 12.9, 0.05);  // mlp_bench.py's docstring
  mlp.input_gradient = false;
  EXPECT_NEAR(MlpStepFlops(mlp) / 1e9, 10.7, 0.05);
}

// Our training graphs execute exactly the analytic GEMM work (plus, for the Transformer, the
// one-hot embedding product and its gradient), so the formulas describe what the step does.
TEST(TrainFlopsTest, TransformerTrainGraphMatchesTheFormula) {
  for (const models::TransformerOptions& o :
       {models::BenchConfig(), models::ModelScaleBenchConfig()}) {
    ASSERT_OK_AND_ASSIGN(models::TrainGraph tg, models::BuildTransformerTrainGraph(o, Sgd()));
    EXPECT_DOUBLE_EQ(GraphGemmFlops(tg.graph, {tg.loss}),
                     TransformerStepFlops(o) + TransformerEmbeddingFlops(o))
        << "d_model " << o.d_model;
  }
}

TEST(TrainFlopsTest, MlpTrainGraphMatchesTheFormula) {
  for (bool input_gradient : {false, true}) {
    models::MlpOptions m;
    m.biases = true;
    m.fixed_data = true;
    m.input_gradient = input_gradient;
    ASSERT_OK_AND_ASSIGN(models::TrainGraph tg, models::BuildMlpTrainGraph(m, Sgd()));
    EXPECT_DOUBLE_EQ(GraphGemmFlops(tg.graph, {tg.loss}), MlpStepFlops(m))
        << "input_gradient " << input_gradient;
  }
}

}  // namespace
}  // namespace bench
}  // namespace meshrt
