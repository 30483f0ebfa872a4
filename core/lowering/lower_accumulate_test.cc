// When the lowering keeps a microbatch accumulator partial and guards its resolve
// (core/lowering/lower_accumulate.cc) and when it must not: a gradient assigned to a variable (a value the
// skipped resolve would change), an accumulator that does not start at zero, a predicate that is
// not a float32 scalar. Whatever it decides, training equals the interpreter.
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/optimizers.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

const Shape kX({{"batch", 8}, {"d_in", 4}});

// loss = mean((x · w)^2), trained by SGD over 2 microbatches; `extend` may add to the graph.
v1::Graph TrainGraph(const std::function<void(GraphBuilder&, const TrainOps&)>& extend = {}) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", kX);
  Initializer init;
  init.kind = "uniform";
  init.seed = 3;
  TensorRef w = b.Variable("w", Shape({{"d_in", 4}, {"d_out", 3}}), init);
  TensorRef y = b.Einsum({x, w}, Shape({{"batch", 8}, {"d_out", 3}}));
  TensorRef loss = b.ReduceMean(b.Mul(y, y), {}, "loss");
  TrainOptions o;
  o.learning_rate.base = 0.1f;
  o.microbatches = 2;
  absl::StatusOr<TrainOps> ops = Minimize(b, loss, {w}, o);
  EXPECT_TRUE(ops.ok()) << ops.status();
  if (extend && ops.ok()) extend(b, *ops);
  return b.proto();
}

v1::Op* FindOp(v1::Graph& g, const std::string& name) {
  for (v1::Op& op : *g.mutable_ops()) {
    if (op.name() == name) return &op;
  }
  ADD_FAILURE() << "no op " << name;
  return g.mutable_ops(0);
}

TensorMap Feeds(int step) {
  Tensor x(DType::kFloat32, kX);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] = std::sin(0.3f * (i + 5 * step));
  return {{"x", x}};
}

// Lowers `proto` on b:2 with the batch split; checks whether w/acc is partial (and its sum's
// resolve guarded) and that 4 steps (2 cycles) fetching the loss equal the interpreter.
void Check(const v1::Graph& proto, bool partial) {
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(proto));
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("b:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("batch:b", mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program p, Lower(g, mesh, rules));
  int guarded = 0;
  for (const v1::Instruction& inst : p.instructions()) guarded += inst.has_predicate();
  EXPECT_EQ(guarded, partial ? 1 : 0);
  for (const v1::ProgramVariable& v : p.variables()) {
    EXPECT_EQ(v.partial_sum_axes_size(), v.name() == "w/acc" && partial ? 1 : 0) << v.name();
  }
  ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(p, {&CpuKernels()}));
  TensorMap state;
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    ASSERT_OK_AND_ASSIGN(TensorMap want, InterpretStep(g, Feeds(step), {"loss"}, &state));
    ASSERT_OK_AND_ASSIGN(TensorMap got, sim->Step(Feeds(step), {"loss"}));
    EXPECT_LE(MaxRelativeError(got.at("loss"), want.at("loss")), 1e-5);
    ASSERT_OK_AND_ASSIGN(TensorMap vars, sim->Variables());
    for (const auto& [name, value] : state) {
      EXPECT_LE(MaxRelativeError(vars.at(name), value), 1e-5) << name;
    }
  }
}

TEST(LowerAccumulateTest, TheAccumulatorOfADataParallelGradientIsPartial) { Check(TrainGraph(), true); }

TEST(LowerAccumulateTest, NotWhenAVariableTakesTheAccumulatedGradient) {
  // gradients[0] = (acc + g) / K is the running mean on every step: a skipped resolve would
  // assign zeros to `seen` on the accumulating steps.
  Check(TrainGraph([](GraphBuilder& b, const TrainOps& ops) {
          b.Assign(b.Variable("seen", ops.gradients[0].shape), ops.gradients[0], "keep");
        }),
        false);
}

TEST(LowerAccumulateTest, NotWhenTheAccumulatorDoesNotStartAtZero) {
  v1::Graph g = TrainGraph();
  (*FindOp(g, "w/acc")->mutable_attrs())["initializer"].set_s("ones");
  Check(g, false);  // every processor's ones would sum to 2
}

TEST(LowerAccumulateTest, NotWhenThePredicateIsNoFloatScalar) {
  for (const char* predicate : {"x", "no_such_tensor"}) {
    SCOPED_TRACE(predicate);
    v1::Graph g = TrainGraph();
    (*FindOp(g, "w/acc")->mutable_attrs())["accumulator_apply"].set_s(predicate);
    Check(g, false);
  }
}

}  // namespace
}  // namespace meshrt
