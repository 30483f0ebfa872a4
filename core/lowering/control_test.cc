// while_loop: the reference semantics by hand, layout invariance on the simulated mesh, and the
// lowering's promise that an einsum accumulator is reduced once after the loop.
#include "core/lowering/ops_control.h"

#include <map>
#include <string>

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

// Body: s -> s + s (carried), acc = sum over a of (s + s).
v1::Graph DoublingBody() {
  GraphBuilder b;
  TensorRef s = b.Placeholder("s", Shape({{"a", 4}}));
  TensorRef d = b.Add(s, s, "d");
  b.MarkOutput(d);
  b.MarkOutput(b.ReduceSum(d, {"a"}, "total"));
  return b.proto();
}

v1::Op Loop(const v1::Graph& body, int64_t trips, std::vector<std::string> carried, int output) {
  v1::Op op;
  op.set_type("while_loop");
  *op.mutable_body() = body;
  (*op.mutable_attrs())["trip_count"].set_i(trips);
  for (const std::string& c : carried) {
    (*op.mutable_attrs())["carried"].mutable_strings()->add_values(c);
  }
  (*op.mutable_attrs())["output"].set_i(output);
  return op;
}

TEST(WhileLoopTest, CarriedValueAndAccumulatorByHand) {
  GraphBuilder g;
  TensorRef init = g.Constant(Tensor::Float(Shape({{"a", 4}}), {1, 2, 3, 4}), "init");
  g.Apply(Loop(DoublingBody(), 3, {"s"}, 0), {init}, "final");
  g.Apply(Loop(DoublingBody(), 3, {"s"}, 1), {init}, "sum");
  g.Apply(Loop(DoublingBody(), 0, {"s"}, 1), {init}, "none");
  ASSERT_OK_AND_ASSIGN(Graph graph, g.Build());
  ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(graph, {}));
  // s: 1,2,3,4 -> 2,4,6,8 (sum 20) -> 4,8,12,16 (40) -> 8,16,24,32 (80).
  EXPECT_EQ(out["final"].floats(), absl::MakeConstSpan(std::vector<float>{8, 16, 24, 32}));
  EXPECT_EQ(out["sum"].floats(), absl::MakeConstSpan(std::vector<float>{140}));
  EXPECT_EQ(out["none"].floats(), absl::MakeConstSpan(std::vector<float>{0}));
}

// Counts the ops it computes (by type) and computes them with the reference kernels.
class CountingRunner : public KernelRunner {
 public:
  using KernelRunner::Run;
  absl::Status Run(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* output,
                   const KernelContext& context) const override {
    ++counts[op.type()];
    KernelContext mine = context;
    if (mine.runner == nullptr) mine.runner = this;
    return ReferenceKernels().Run(op, inputs, output, mine);
  }
  mutable std::map<std::string, int> counts;
};

TEST(WhileLoopTest, TheBodyRunsOnTheInterpretersKernels) {
  GraphBuilder g;
  TensorRef init = g.Constant(Tensor::Float(Shape({{"a", 4}}), {1, 2, 3, 4}), "init");
  g.Apply(Loop(DoublingBody(), 3, {"s"}, 0), {init}, "final");
  ASSERT_OK_AND_ASSIGN(Graph graph, g.Build());
  CountingRunner counting;
  ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(graph, {}, {"final"}, counting));
  EXPECT_EQ(out["final"].floats(), absl::MakeConstSpan(std::vector<float>{8, 16, 24, 32}));
  EXPECT_EQ(counting.counts["while_loop"], 1);
  EXPECT_EQ(counting.counts["add"], 3);  // the body's add, once per iteration, on this runner
  // The fast kernels too: the same answer with the body on CpuKernels.
  ASSERT_OK_AND_ASSIGN(TensorMap fast, Interpret(graph, {}, {"final"}, CpuKernels()));
  EXPECT_EQ(fast["final"].floats(), out["final"].floats());
}

TEST(WhileLoopTest, MalformedLoopsAreRefused) {
  GraphBuilder g;
  TensorRef init = g.Constant(Tensor::Float(Shape({{"a", 4}}), {1, 2, 3, 4}), "init");
  g.Apply(Loop(DoublingBody(), 2, {"nope"}, 0), {init}, "bad");
  EXPECT_TRUE(StatusIs(g.Build().status(), absl::StatusCode::kInvalidArgument,
                       {"op 'bad' (while_loop)", "body placeholder 's' is not a carried tensor"}));
  GraphBuilder h;
  TensorRef init2 = h.Constant(Tensor::Float(Shape({{"a", 4}}), {1, 2, 3, 4}), "init");
  h.Apply(Loop(DoublingBody(), 2, {"s"}, 5), {init2}, "bad");
  EXPECT_TRUE(StatusIs(h.Build().status(), absl::StatusCode::kInvalidArgument,
                       {"output 5"}));
}

// Microbatch accumulation: x shrinks each iteration; acc = einsum(x, w) over batch. With batch
// split, each iteration's einsum is a partial sum; the loop adds them locally and reduces once.
Graph Microbatches(int64_t trips) {
  GraphBuilder body;
  TensorRef x = body.Placeholder("x", Shape({{"batch", 8}, {"d", 4}}));
  TensorRef w = body.Placeholder("w", Shape({{"batch", 8}, {"h", 6}}));
  body.MarkOutput(body.Scale(x, 0.5f, "x_next"));
  body.MarkOutput(body.Scale(w, 1.0f, "w_next"));
  body.MarkOutput(body.Einsum({x, w}, Shape({{"d", 4}, {"h", 6}}), "g"));
  GraphBuilder g;
  TensorRef x0 = g.Placeholder("x0", Shape({{"batch", 8}, {"d", 4}}));
  TensorRef w0 = g.Placeholder("w0", Shape({{"batch", 8}, {"h", 6}}));
  g.MarkOutput(g.Apply(Loop(body.proto(), trips, {"x", "w"}, 2), {x0, w0}, "grads"));
  g.MarkOutput(g.Apply(Loop(body.proto(), trips, {"x", "w"}, 0), {x0, w0}, "x_last"));
  return g.Build().value();
}

TEST(WhileLoopTest, EinsumAccumulatorIsReducedOnceAfterTheLoop) {
  const Graph graph = Microbatches(3);
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("rows:2,cols:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("batch:rows,h:cols", mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(graph, mesh, rules));
  int allreduces = 0, adds = 0;
  for (const v1::Instruction& inst : program.instructions()) {
    if (inst.source_op() != "grads") continue;
    if (inst.has_collective()) ++allreduces;
    if (inst.has_local() && inst.local().type() == "add") ++adds;
  }
  EXPECT_EQ(allreduces, 1);  // not one per iteration
  EXPECT_EQ(adds, 2);        // three partial sums added locally
}

TEST(WhileLoopTest, LayoutInvariance) {
  for (int64_t trips : {0, 1, 3}) {
    const Graph graph = Microbatches(trips);
    TensorMap feeds;
    for (const std::string& p : graph.Placeholders()) {
      Tensor t(DType::kFloat32, graph.type(p).shape);
      for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = 0.25f * ((i * 7) % 11) - 1;
      feeds[p] = t;
    }
    ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(graph, feeds));
    for (const auto& [mesh_text, layout_text] : std::vector<std::pair<std::string, std::string>>{
             {"p:1", ""}, {"p:4", "batch:p"}, {"rows:2,cols:2", "batch:rows,h:cols"},
             {"rows:2,cols:2", "d:rows,batch:cols"}, {"x:2,y:2,z:2", "batch:x,d:y,h:z"}}) {
      SCOPED_TRACE(absl::StrCat(trips, " trips, ", mesh_text, " / ", layout_text));
      Mesh mesh = Mesh::Parse(mesh_text).value();
      LayoutRules rules = LayoutRules::Parse(layout_text, mesh).value();
      ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(graph, mesh, rules));
      SimulatedMeshOptions options;
      options.kernels = &CpuKernels();
      ASSERT_OK_AND_ASSIGN(TensorMap got, RunOnSimulatedMesh(program, feeds, options));
      for (const char* name : {"grads", "x_last"}) {
        EXPECT_LE(MaxRelativeError(got.at(name), want.at(name)), 1e-5) << name;
      }
    }
  }
}

}  // namespace
}  // namespace meshrt
