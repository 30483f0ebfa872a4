// The cost model's FLOPs (core/planning/cost_model.h) of the real training graphs, summed over processors,
// equal train_flops.h's formulas: what `meshrt explain` predicts is the work the step does.
#include "bench/sgd_for_tests.h"
#include "bench/train_flops.h"
#include "core/lowering/lowering.h"
#include "core/planning/cost_model.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "models/train.h"

namespace meshrt {
namespace bench {
namespace {

// GEMM FLOPs (einsums of >= 2 operands) of one step fetching `loss`, summed over processors.
double ProgramGemmFlops(const Graph& graph, const std::string& loss, const std::string& mesh_text,
                        const std::string& rules_text) {
  Mesh mesh = Mesh::Parse(mesh_text).value();
  absl::StatusOr<v1::Program> program =
      Lower(graph, mesh, LayoutRules::Parse(rules_text, mesh).value());
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return -1;
  std::vector<std::string> fetches = {loss};
  absl::StatusOr<ProgramCost> cost = CostProgram(*program, HardwareProfile(), &fetches);
  EXPECT_TRUE(cost.ok()) << cost.status();
  if (!cost.ok()) return -1;
  double flops = 0;
  for (const InstructionCost& i : cost->instructions) {
    if (i.runs && i.gemm) flops += i.flops;
  }
  return flops * cost->processors;
}

TEST(CostModelFlopsTest, MlpTrainGraphSummedOverProcessors) {
  models::MlpOptions m;
  m.batch = 8;
  m.d_model = 16;
  m.d_ff = 32;
  m.biases = true;
  m.fixed_data = true;
  m.input_gradient = true;
  ASSERT_OK_AND_ASSIGN(models::TrainGraph tg, models::BuildMlpTrainGraph(m, Sgd()));
  for (const auto& [mesh, rules] : std::vector<std::pair<std::string, std::string>>{
           {"", ""}, {"p:2", "batch:p"}, {"p:4", "d_ff:p"}, {"r:2,c:2", "batch:r,d_ff:c"}}) {
    EXPECT_DOUBLE_EQ(ProgramGemmFlops(tg.graph, tg.loss, mesh, rules), MlpStepFlops(m))
        << "mesh '" << mesh << "' rules '" << rules << "'";
  }
}

TEST(CostModelFlopsTest, TransformerTrainGraphSummedOverProcessors) {
  models::TransformerOptions o;
  o.batch = 4;
  o.length = 8;
  o.d_model = 16;
  o.heads = 2;
  o.d_kv = 8;
  o.d_ff = 32;
  o.layers = 2;
  o.vocab = 32;
  ASSERT_OK_AND_ASSIGN(models::TrainGraph tg, models::BuildTransformerTrainGraph(o, Sgd()));
  const double formula = TransformerStepFlops(o) + TransformerEmbeddingFlops(o);
  for (const auto& [mesh, rules] : std::vector<std::pair<std::string, std::string>>{
           {"", ""}, {"p:2", "batch:p"}, {"p:4", "batch:p"}}) {
    EXPECT_DOUBLE_EQ(ProgramGemmFlops(tg.graph, tg.loss, mesh, rules), formula)
        << "mesh '" << mesh << "' rules '" << rules << "'";
  }
  // Model parallelism over heads and d_ff leaves the one-hot embedding and the logits (no heads
  // or d_ff dim) replicated over c: both processors along c compute them, so the sum over
  // processors exceeds the formula by exactly those products' second copy.
  const double embedding_and_logits =
      TransformerEmbeddingFlops(o) + 3 * 2.0 * o.batch * o.length * o.d_model * o.vocab;
  EXPECT_DOUBLE_EQ(ProgramGemmFlops(tg.graph, tg.loss, "r:2,c:2", "batch:r,heads:c,d_ff:c"),
                   formula + embedding_and_logits);
}

}  // namespace
}  // namespace bench
}  // namespace meshrt
