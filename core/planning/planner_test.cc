#include "core/planning/planner.h"

#include <string>
#include <vector>

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/planning/memory_model.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// y = relu(x . w1) . w2 with variables w1 [d_model, d_ff], w2 [d_ff, d_model] of 64 KiB each.
Graph TwoLayers() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 64}, {"d_model", 64}}));
  TensorRef w1 = b.Variable("w1", Shape({{"d_model", 64}, {"d_ff", 256}}));
  TensorRef w2 = b.Variable("w2", Shape({{"d_ff", 256}, {"d_model", 64}}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 64}, {"d_ff", 256}})));
  b.MarkOutput(b.Einsum({h, w2}, Shape({{"batch", 64}, {"d_model", 64}}), "y"));
  return b.Build().value();
}

PlanOptions Options() {
  PlanOptions o;
  o.profile.gemm_small_flops_per_s = 1e9;
  o.profile.gemm_large_flops_per_s = 1e9;
  o.profile.elementwise_flops_per_s = 1e9;
  o.profile.memory_bytes_per_s = 1e9;
  o.profile.collectives = DefaultCollectiveLinks();
  return o;
}

TEST(PlannerTest, EvaluationIsTheCostModelsTimeAndTheMemoryModelsPeak) {
  const Graph g = TwoLayers();
  const Mesh mesh = *Mesh::Parse("x:2");
  const LayoutRules rules = *LayoutRules::Parse("d_ff:x", mesh);
  const PlanOptions o = Options();
  ASSERT_OK_AND_ASSIGN(PlannedCandidate c, EvaluateLayout(g, mesh, rules, o));
  ASSERT_OK_AND_ASSIGN(v1::Program p, Lower(g, mesh, rules));
  ASSERT_OK_AND_ASSIGN(ProgramCost cost, CostProgram(p, o.profile));
  ASSERT_OK_AND_ASSIGN(MemoryReport m, ComputeMemory(p));
  EXPECT_DOUBLE_EQ(c.compute_seconds, cost.total.compute_s);
  EXPECT_DOUBLE_EQ(c.comm_seconds, cost.total.comm_s);
  EXPECT_DOUBLE_EQ(c.seconds, cost.step_s);
  EXPECT_GT(c.comm_seconds, 0);  // d_ff split: y is a partial sum, allreduced
  EXPECT_EQ(c.peak_bytes, m.peak_bytes);
  EXPECT_EQ(c.rules.ToString(), "d_ff:x");
}

TEST(PlannerTest, OverTheMemoryLimitIsRefusedNamingThePeakAndTheLimit) {
  const Graph g = TwoLayers();
  const Mesh mesh = *Mesh::Parse("x:2");
  PlanOptions o = Options();
  o.memory_limit_bytes = 1024;
  EXPECT_TRUE(StatusIs(EvaluateLayout(g, mesh, LayoutRules(), o).status(),
                       absl::StatusCode::kResourceExhausted, {"peak", "limit of 1.00 KiB"}));
  EXPECT_TRUE(
      StatusIs(EvaluateLayout(g, mesh, *LayoutRules::Parse("batch:x,d_model:x", mesh), o).status(),
               absl::StatusCode::kInvalidArgument));
}

TEST(PlannerTest, DataParallelWhenEverythingFitsWeightsSplitWhenTheyDoNot) {
  const Graph g = TwoLayers();
  const std::vector<Mesh> meshes = {*Mesh::Parse("x:2")};
  // Fits: splitting the batch halves the compute and communicates nothing in a forward step.
  ASSERT_OK_AND_ASSIGN(Plan free, PlanLayout(g, meshes, Options()));
  ASSERT_FALSE(free.best.empty());
  EXPECT_EQ(free.best[0].rules.ToString(), "batch:x");
  EXPECT_EQ(free.best[0].comm_seconds, 0);
  for (size_t i = 1; i < free.best.size(); ++i) {
    EXPECT_LE(free.best[i - 1].seconds, free.best[i].seconds);
  }
  // Below data parallelism's peak, the weights (128 KiB replicated) must be split.
  PlanOptions tight = Options();
  ASSERT_OK_AND_ASSIGN(
      PlannedCandidate dp,
      EvaluateLayout(g, meshes[0], *LayoutRules::Parse("batch:x", meshes[0]), tight));
  tight.memory_limit_bytes = dp.peak_bytes - 1;
  ASSERT_OK_AND_ASSIGN(Plan fit, PlanLayout(g, meshes, tight));
  ASSERT_FALSE(fit.best.empty());
  EXPECT_GT(fit.refused, 0);
  for (const PlannedCandidate& c : fit.best) {
    EXPECT_LT(c.peak_bytes, dp.peak_bytes) << c.rules.ToString();
    EXPECT_TRUE(c.rules.rules().count("d_ff") || c.rules.rules().count("d_model"))
        << c.rules.ToString();
  }
  // Nothing fits in 1 KiB.
  tight.memory_limit_bytes = 1024;
  EXPECT_TRUE(StatusIs(PlanLayout(g, meshes, tight).status(), absl::StatusCode::kNotFound,
                       {"no layout", "over the limit"}));
  EXPECT_TRUE(StatusIs(PlanLayout(g, {}, Options()).status(), absl::StatusCode::kInvalidArgument));
}

// Workers on two hosts (a:2 spans them, b:2 stays within each) with slow cross-host links: the
// planner keeps every collective within a host, and evaluates both orders of the equal-size dims.
TEST(PlannerTest, CollectivesStayWithinAHostWhenGroupsAcrossHostsAreSlow) {
  const Graph g = TwoLayers();
  const Mesh mesh = *Mesh::Parse("a:2,b:2");
  PlanOptions o = Options();
  ASSERT_OK_AND_ASSIGN(Plan one_host, PlanLayout(g, {mesh}, o));
  o.profile.processor_hosts = {"h0", "h0", "h1", "h1"};  // rank = 2a + b
  for (const char* kind : {"allreduce", "allgather", "alltoall", "reduce_scatter"}) {
    o.profile.cross_host[kind] = CollectiveLink{1.0, 1e6};
  }
  ASSERT_OK_AND_ASSIGN(Plan two_hosts, PlanLayout(g, {mesh}, o));
  EXPECT_GT(two_hosts.evaluations, one_host.evaluations);  // no symmetry across hosts
  const PlannedCandidate& best = two_hosts.best[0];
  EXPECT_LT(best.seconds, 1.0) << best.rules.ToString();
  ASSERT_OK_AND_ASSIGN(v1::Program p, Lower(g, best.mesh, best.rules));
  ASSERT_OK_AND_ASSIGN(ProgramCost cost, CostProgram(p, o.profile));
  int collectives = 0;
  for (const InstructionCost& c : cost.instructions) {
    if (!c.runs || p.instructions(c.index).kind_case() != v1::Instruction::kCollective) continue;
    EXPECT_FALSE(c.cross_host) << best.rules.ToString() << ": " << c.source_op;
    ++collectives;
  }
  // Not simply replicated: it still splits work over both dims, and communicates within hosts.
  EXPECT_NE(best.rules.ToString().find(":a"), std::string::npos) << best.rules.ToString();
  EXPECT_NE(best.rules.ToString().find(":b"), std::string::npos) << best.rules.ToString();
  EXPECT_GT(collectives, 0) << best.rules.ToString();
}

TEST(PlannerTest, AutoMeshSearchIsDeterministicAndExplained) {
  const Graph g = TwoLayers();
  ASSERT_OK_AND_ASSIGN(std::vector<Mesh> meshes, MeshesFor(4));
  ASSERT_OK_AND_ASSIGN(Plan a, PlanLayout(g, meshes, Options()));
  ASSERT_OK_AND_ASSIGN(Plan b, PlanLayout(g, meshes, Options()));
  ASSERT_EQ(a.best.size(), b.best.size());
  ASSERT_GE(a.best.size(), 2u);
  for (size_t i = 0; i < a.best.size(); ++i) {
    EXPECT_EQ(a.best[i].mesh.ToString() + " " + a.best[i].rules.ToString(),
              b.best[i].mesh.ToString() + " " + b.best[i].rules.ToString());
    EXPECT_DOUBLE_EQ(a.best[i].seconds, b.best[i].seconds);
  }
  EXPECT_EQ(a.evaluations, b.evaluations);
  EXPECT_LE(a.lowerings, a.evaluations);
  // The whole batch over all 4 processors computes a quarter of the products, talking to nobody.
  EXPECT_EQ(a.best[0].mesh.ToString(), "x:4");
  EXPECT_EQ(a.best[0].rules.ToString(), "batch:x");
  const std::string text = ExplainPlan(a);
  EXPECT_NE(text.find("planner: chose mesh x:4  layout batch:x  predicted"), std::string::npos)
      << text;
  EXPECT_NE(text.find("next 1: mesh"), std::string::npos) << text;
  EXPECT_NE(text.find("searched"), std::string::npos) << text;
}

}  // namespace
}  // namespace meshrt
