// PlanStep on small hand-written programs (exact plans) and on a lowered training step (the
// properties every plan has).
#include "runtime/step_plan.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "core/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/test_kernels.h"
#include "runtime/test_training_graphs.h"

namespace meshrt {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A float32 instruction of slice [n:4] (text format), reading `inputs`, writing `output`.
std::string Instr(const std::string& kind, const std::string& inputs, int output,
                  const std::string& extra = "") {
  return absl::StrCat("instructions { output: ", output, " inputs: [", inputs,
                      "] dtype: DT_FLOAT32 slice_shape { dims { name: \"n\" size: 4 } } ", extra,
                      " ", kind, " }\n");
}
std::string Local(const std::string& type, const std::string& inputs, int output,
                  const std::string& extra = "") {
  return Instr(absl::StrCat("local { type: \"", type, "\" }"), inputs, output, extra);
}
std::string AllReduce(const std::string& inputs, int output, const std::string& extra = "") {
  return Instr("collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_SUM }", inputs,
               output, extra);
}
// A program input, output ("inputs" / "outputs") or variable of shape [n:4] (scalar: `shape` {}).
std::string Tensor4(const std::string& field, const std::string& name, int buffer,
                    const std::string& extra = "", const std::string& shape =
                                                       "{ dims { name: \"n\" size: 4 } }") {
  return absl::StrCat(field, " { name: \"", name, "\" buffer: ", buffer,
                      " dtype: DT_FLOAT32 shape ", shape, " ", extra, " }\n");
}

// On x:2, input a (buffer 0):
//   0: y = add(a, a)          output "y" (1)
//   1: z = add(y, y)          output "z" (2)
//   2: r = allreduce(a)       small: deferred to its reader
//   3: u = add(r, a)          the update of variable v (5)
//   4: w = add(a, a)          output "w" (6)
v1::Program PruningProgram() {
  return ParseProgram(absl::StrCat(
      "mesh { dims { name: \"x\" size: 2 } } num_buffers: 7\n", Tensor4("inputs", "a", 0),
      Local("add", "0, 0", 1), Local("add", "1, 1", 2), AllReduce("0", 3), Local("add", "3, 0", 4),
      Local("add", "0, 0", 6), Tensor4("outputs", "y", 1), Tensor4("outputs", "z", 2),
      Tensor4("outputs", "w", 6), Tensor4("variables", "v", 5, "update_buffer: 4")));
}

TEST(StepPlanTest, AnOutputNotFetchedDoesNotRunItsProducersAndAVariableUpdateAlwaysRuns) {
  const v1::Program program = PruningProgram();
  const std::vector<std::string> y = {"y"};
  const StepPlan plan = PlanStep(program, &y);
  EXPECT_THAT(plan.runs, ElementsAre(true, false, true, true, false));
  EXPECT_THAT(plan.reads[1], IsEmpty());
  EXPECT_THAT(plan.reads[3], ElementsAre(3, 0));
  EXPECT_THAT(plan.writes[3], ElementsAre(4));
  // Inputs, the fetched output, the variable and its update; a deferred allreduce's input.
  EXPECT_THAT(plan.pinned, ElementsAre(true, true, false, false, true, true, false));
  EXPECT_THAT(plan.last_reader, ElementsAre(3, -1, -1, 3, -1, -1, -1));
  EXPECT_TRUE(plan.Dead(3, 3));
  EXPECT_FALSE(plan.Dead(0, 3));   // an input
  EXPECT_FALSE(plan.Dead(3, 2));   // not its last reader
  EXPECT_FALSE(plan.Dead(99, 3));  // out of range

  const std::vector<std::string> nothing = {"not_an_output"};
  EXPECT_THAT(PlanStep(program, &nothing).runs, ElementsAre(false, false, true, true, false));
  const std::vector<std::string> z = {"z"};
  EXPECT_THAT(PlanStep(program, &z).runs, ElementsAre(true, true, true, true, false));
  EXPECT_THAT(PlanStep(program, nullptr).runs, ElementsAre(true, true, true, true, true));
  EXPECT_THAT(PlanStep(program, nullptr).pinned,
              ElementsAre(true, true, true, false, true, true, true));
}

TEST(StepPlanTest, ASmallAllReduceIsDueAtItsFirstRunningReader) {
  const v1::Program program = PruningProgram();
  const std::vector<std::string> y = {"y"};
  const StepPlan plan = PlanStep(program, &y);
  EXPECT_THAT(plan.due, ElementsAre(-1, -1, 3, -1, -1));
  EXPECT_THAT(plan.deferred_bytes, ElementsAre(0, 0, 16, 0, 0));
}

// On x:2, inputs g (0) and the predicate p (1, a scalar):
//   0: sum = allreduce(g) guarded by p    output "sum" (2)
//   1: twice = add(sum, sum)              output "twice" (3), the update of variable v (5)
//   2: other = allreduce(g)               output "other" (4), read by nothing: due at the end
v1::Program GuardedProgram() {
  return ParseProgram(absl::StrCat(
      "mesh { dims { name: \"x\" size: 2 } } num_buffers: 6\n", Tensor4("inputs", "g", 0),
      Tensor4("inputs", "p", 1, "", "{}"), AllReduce("0", 2, "predicate: 1"),
      Local("add", "2, 2", 3), AllReduce("0", 4), Tensor4("outputs", "sum", 2),
      Tensor4("outputs", "twice", 3), Tensor4("outputs", "other", 4),
      Tensor4("variables", "v", 5, "update_buffer: 3")));
}

TEST(StepPlanTest, AGuardedInstructionIsSkippableUnlessAFetchedOutputDependsOnIt) {
  const v1::Program program = GuardedProgram();
  const std::vector<std::string> other = {"other"};
  const StepPlan plan = PlanStep(program, &other);
  EXPECT_THAT(plan.runs, ElementsAre(true, true, true));
  EXPECT_THAT(plan.guarded, ElementsAre(true, false, false));
  EXPECT_TRUE(plan.pinned[1]);  // the predicate, read when instruction 0 is reached
  EXPECT_THAT(plan.due, ElementsAre(1, -1, 3));
  const std::vector<std::string> twice = {"twice"};
  EXPECT_THAT(PlanStep(program, &twice).guarded, ElementsAre(false, false, false));
  EXPECT_THAT(PlanStep(program, nullptr).guarded, ElementsAre(false, false, false));
}

// Inputs g (0) and lr (1, a scalar); variable w (3) updated to w - g * lr:
//   0: m = mul(g, lr)   read once: fused into 1
//   1: u = sub(w, m)    the update of w (5)
v1::Program ScaledUpdateProgram() {
  return ParseProgram(absl::StrCat(
      "mesh { dims { name: \"x\" size: 1 } } num_buffers: 6\n", Tensor4("inputs", "g", 0),
      Tensor4("inputs", "lr", 1, "", "{}"), Local("mul", "0, 1", 4), Local("sub", "3, 4", 5),
      Tensor4("variables", "w", 3, "update_buffer: 5")));
}

TEST(StepPlanTest, AScaledUpdateIsFusedWithAFetchListOnly) {
  const v1::Program program = ScaledUpdateProgram();
  const std::vector<std::string> none;
  const StepPlan plan = PlanStep(program, &none);
  ASSERT_EQ(plan.fused.size(), 1u);
  const FusedUpdate& f = plan.fused.at(1);
  EXPECT_EQ(f.mul, 0);
  EXPECT_EQ(f.mul_input, 1);
  EXPECT_EQ(f.einsum, -1);
  EXPECT_THAT(plan.runs, ElementsAre(false, true));
  EXPECT_THAT(plan.reads[1], ElementsAre(3, 4, 0, 1));
  EXPECT_THAT(plan.writes[1], ElementsAre(5, 4));
  EXPECT_THAT(plan.last_reader, ElementsAre(1, 1, -1, 1, 1, -1));

  const StepPlan all = PlanStep(program, nullptr);
  EXPECT_THAT(all.fused, IsEmpty());
  EXPECT_THAT(all.runs, ElementsAre(true, true));
  EXPECT_THAT(all.last_reader, ElementsAre(0, 0, -1, 1, 1, -1));
}

void ExpectSamePlan(const StepPlan& a, const StepPlan& b) {
  EXPECT_EQ(a.runs, b.runs);
  EXPECT_EQ(a.guarded, b.guarded);
  EXPECT_EQ(a.due, b.due);
  EXPECT_EQ(a.deferred_bytes, b.deferred_bytes);
  EXPECT_EQ(a.last_reader, b.last_reader);
  EXPECT_EQ(a.pinned, b.pinned);
  EXPECT_EQ(a.reads, b.reads);
  EXPECT_EQ(a.writes, b.writes);
  ASSERT_EQ(a.fused.size(), b.fused.size());
  for (const auto& [s, f] : a.fused) {
    ASSERT_EQ(b.fused.count(s), 1u) << s;
    EXPECT_EQ(f.ops(), b.fused.at(s).ops()) << s;
    EXPECT_EQ(f.mul_input, b.fused.at(s).mul_input) << s;
    EXPECT_EQ(f.einsum_input, b.fused.at(s).einsum_input) << s;
  }
}

TEST(StepPlanTest, AFetchListsOrderAndRepeatsDoNotMatter) {
  EXPECT_EQ(StepPlanKey(nullptr), std::vector<std::string>{"\x01all"});
  const std::vector<std::string> twice = {"z", "y", "z"};
  EXPECT_THAT(StepPlanKey(&twice), ElementsAre("y", "z"));

  TrainOptions train;
  train.optimizer = "sgd";
  ASSERT_OK_AND_ASSIGN(models::TrainGraph m, TinyMlpTrainGraph(train));
  const Mesh mesh = Mesh::Parse("x:2").value();
  ASSERT_OK_AND_ASSIGN(v1::Program program,
                       Lower(m.graph, mesh, LayoutRules::Parse("batch:x", mesh).value()));
  const std::vector<std::string> fetches = {m.loss, m.global_norm};
  const std::vector<std::string> permuted = {m.global_norm, m.loss, m.global_norm, m.loss};
  const StepPlan plan = PlanStep(program, &fetches);
  ExpectSamePlan(plan, PlanStep(program, &permuted));
  // Data-parallel SGD: gradient allreduces deferred to their first reader, updates fused.
  EXPECT_FALSE(plan.fused.empty());
  int deferred = 0;
  for (int i = 0; i < program.instructions_size(); ++i) {
    if (plan.due[i] < 0) continue;
    ++deferred;
    EXPECT_TRUE(plan.runs[i]);
    EXPECT_GT(plan.due[i], i);
    EXPECT_GT(plan.deferred_bytes[i], 0);
    const int out = program.instructions(i).output();
    for (int j = i + 1; j < plan.due[i]; ++j) {
      for (int b : plan.reads[j]) EXPECT_NE(b, out) << "instruction " << j << " reads " << i;
    }
  }
  EXPECT_GT(deferred, 0);
}

}  // namespace
}  // namespace meshrt
