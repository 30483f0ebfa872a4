// Gradients: checked against central finite differences of the interpreter, on the simulated
// mesh under several layouts against the interpreter, and for the data-parallel allreduce that
// must appear by itself.
#include "core/train/autodiff.h"

#include <random>

#include "absl/strings/match.h"
#include "core/lowering/lowering.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

struct Model {
  GraphBuilder b;
  TensorRef x, w1, w2, loss;
  std::vector<TensorRef> grads;
};

// loss = mean over batch of sum over d_out of (tanh(relu(x.w1) . w2) * x-dependent scale)^2, with
// several op kinds on the path.
void BuildModel(Model* m) {
  GraphBuilder& b = m->b;
  m->x = b.Placeholder("x", Shape({{"batch", 4}, {"d_in", 3}}));
  m->w1 = b.Placeholder("w1", Shape({{"d_in", 3}, {"hidden", 4}}));
  m->w2 = b.Placeholder("w2", Shape({{"hidden", 4}, {"d_out", 2}}));
  TensorRef h = b.Relu(b.Einsum({m->x, m->w1}, Shape({{"batch", 4}, {"hidden", 4}})));
  TensorRef y = b.Einsum({h, m->w2}, Shape({{"batch", 4}, {"d_out", 2}}));
  TensorRef t = b.Mul(b.Apply([] {
                        v1::Op op;
                        op.set_type("tanh");
                        return op;
                      }(), {y}),
                      b.Exp(b.Scale(b.ReduceSum(m->x, {"d_in"}), 0.1f)));
  TensorRef sq = b.Mul(t, t);
  m->loss = b.ReduceMean(b.ReduceSum(sq, {"d_out"}), {"batch"}, "loss");
  auto grads = Gradients(b, m->loss, {m->x, m->w1, m->w2});
  ASSERT_TRUE(grads.ok()) << grads.status();
  m->grads = *grads;
  for (const TensorRef& g : m->grads) b.MarkOutput(g);
  b.MarkOutput(m->loss);
}

TensorMap Feeds(const Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  TensorMap feeds;
  for (const std::string& p : g.Placeholders()) {
    Tensor t(DType::kFloat32, g.type(p).shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng);
    feeds[p] = t;
  }
  return feeds;
}

TEST(AutodiffTest, MatchesFiniteDifferences) {
  Model m;
  BuildModel(&m);
  ASSERT_OK_AND_ASSIGN(Graph graph, m.b.Build());
  TensorMap feeds = Feeds(graph, 5);
  ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(graph, feeds));
  const std::vector<TensorRef> params = {m.x, m.w1, m.w2};
  const float eps = 1e-2f;
  int checked = 0;
  for (size_t p = 0; p < params.size(); ++p) {
    const Tensor& analytic = out.at(m.grads[p].name);
    for (int64_t i = 0; i < analytic.num_elements(); ++i) {
      TensorMap plus = feeds, minus = feeds;
      plus[params[p].name].f32()[i] += eps;
      minus[params[p].name].f32()[i] -= eps;
      const float lp = Interpret(graph, plus, {"loss"}).value().at("loss").f32()[0];
      const float lm = Interpret(graph, minus, {"loss"}).value().at("loss").f32()[0];
      const float numeric = (lp - lm) / (2 * eps);
      EXPECT_NEAR(analytic.f32()[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << params[p].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12 + 12 + 8);
}

TEST(AutodiffTest, GradientsAreLayoutInvariant) {
  Model m;
  BuildModel(&m);
  ASSERT_OK_AND_ASSIGN(Graph graph, m.b.Build());
  TensorMap feeds = Feeds(graph, 9);
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(graph, feeds));
  for (const auto& [mesh_text, layout_text] : std::vector<std::pair<std::string, std::string>>{
           {"p:4", "batch:p"},
           {"rows:2,cols:2", "batch:rows,hidden:cols"},
           {"rows:2,cols:2", "hidden:rows,d_out:cols"},
           {"x:2,y:2,z:2", "batch:x,hidden:y,d_out:z"}}) {
    SCOPED_TRACE(mesh_text + " / " + layout_text);
    Mesh mesh = Mesh::Parse(mesh_text).value();
    ASSERT_OK_AND_ASSIGN(v1::Program program,
                         Lower(graph, mesh, LayoutRules::Parse(layout_text, mesh).value()));
    SimulatedMeshOptions options;
    options.kernels = &CpuKernels();
    ASSERT_OK_AND_ASSIGN(TensorMap got, RunOnSimulatedMesh(program, feeds, options));
    for (const TensorRef& g : m.grads) {
      EXPECT_LE(MaxRelativeError(got.at(g.name), want.at(g.name)), 1e-5) << g.name;
    }
  }
}

// Data parallelism is not special-cased: with batch split, the weight gradient is an einsum that
// reduces batch, and its allreduce over the batch's mesh dim is the gradient synchronisation.
TEST(AutodiffTest, DataParallelGradientAllreduceAppearsByItself) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d", 4}}));
  TensorRef w = b.Placeholder("w", Shape({{"d", 4}, {"h", 2}}));
  TensorRef loss = b.ReduceSum(b.Einsum({x, w}, Shape({{"batch", 8}, {"h", 2}})), {}, "loss");
  ASSERT_OK_AND_ASSIGN(std::vector<TensorRef> grads, Gradients(b, loss, {w}));
  ASSERT_OK_AND_ASSIGN(Graph graph, b.Build());
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("dp:4"));
  ASSERT_OK_AND_ASSIGN(v1::Program program,
                       Lower(graph, mesh, LayoutRules::Parse("batch:dp", mesh).value()));
  int grad_allreduces = 0;
  for (const v1::Instruction& inst : program.instructions()) {
    if (inst.source_op() == grads[0].name && inst.has_collective() &&
        inst.collective().kind() == v1::Collective::ALLREDUCE) {
      ++grad_allreduces;
      EXPECT_EQ(inst.collective().mesh_axes_size(), 1);
    }
  }
  EXPECT_EQ(grad_allreduces, 1);
}

// Cross-entropy of log-softmax-ed, softmax-ed logits against soft targets: the Transformer's loss.
TEST(AutodiffTest, SoftmaxFamilyMatchesFiniteDifferences) {
  GraphBuilder b;
  TensorRef l = b.Placeholder("l", Shape({{"batch", 3}, {"vocab", 5}}));
  TensorRef t = b.Placeholder("t", Shape({{"batch", 3}, {"vocab", 5}}));
  auto with_dims = [](const std::string& type) {
    v1::Op op;
    op.set_type(type);
    op.add_dims("vocab");
    return op;
  };
  TensorRef targets = b.Apply(with_dims("softmax"), {t});
  TensorRef shifted = b.Add(b.Apply(with_dims("log_softmax"), {l}), l);
  TensorRef ce = b.Apply(with_dims("softmax_cross_entropy"), {shifted, targets});
  // A second term whose upstream gradient does not sum to zero over vocab (the cross-entropy's
  // does, which would hide a wrong log_softmax rule).
  TensorRef extra = b.ReduceSum(b.Mul(b.Apply(with_dims("log_softmax"), {l}), t), {});
  TensorRef loss = b.Add(b.ReduceSum(ce, {}), extra, "loss");
  ASSERT_OK_AND_ASSIGN(std::vector<TensorRef> grads, Gradients(b, loss, {l, t}));
  ASSERT_OK_AND_ASSIGN(Graph graph, b.Build());
  TensorMap feeds = Feeds(graph, 3);
  std::vector<std::string> fetches = {grads[0].name, grads[1].name};
  ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(graph, feeds, fetches));
  const float eps = 1e-2f;
  for (int p = 0; p < 2; ++p) {
    const std::string name = p == 0 ? "l" : "t";
    for (int64_t i = 0; i < 15; ++i) {
      TensorMap plus = feeds, minus = feeds;
      plus[name].f32()[i] += eps;
      minus[name].f32()[i] -= eps;
      const float numeric = (Interpret(graph, plus, {"loss"}).value().at("loss").f32()[0] -
                             Interpret(graph, minus, {"loss"}).value().at("loss").f32()[0]) /
                            (2 * eps);
      EXPECT_NEAR(out.at(grads[p].name).f32()[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << name << "[" << i << "]";
    }
  }
}

// while_loop is the one op on a float path without a rule (it is not marked differentiable).
// Gradient ops are named after the op they differentiate ("<op>/grad/<type>"), so a trace, the
// dashboard or an error ties each backward op to the layer it serves.
TEST(AutodiffTest, GradientOpsAreNamedAfterTheirOp) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 2}, {"d", 3}}));
  TensorRef w = b.Variable("layer_0/w", Shape({{"d", 3}, {"h", 4}}));
  TensorRef h;
  {
    auto scope = b.NameScope("layer_0");
    h = b.Relu(b.Einsum({x, w}, Shape({{"batch", 2}, {"h", 4}}), "proj"), "act");
  }
  TensorRef loss = b.ReduceSum(h, {}, "loss");
  const int before = b.proto().ops_size();
  ASSERT_OK_AND_ASSIGN(std::vector<TensorRef> grads, Gradients(b, loss, {w}));
  std::vector<std::string> names;
  for (int i = before; i < b.proto().ops_size(); ++i) names.push_back(b.proto().ops(i).name());
  ASSERT_FALSE(names.empty());
  for (const std::string& n : names) {
    EXPECT_TRUE(absl::StartsWith(n, "loss/grad/") || absl::StartsWith(n, "layer_0/act/grad/") ||
                absl::StartsWith(n, "layer_0/proj/grad/"))
        << n;
  }
  EXPECT_TRUE(absl::StartsWith(grads[0].name, "layer_0/proj/grad/")) << grads[0].name;
  ASSERT_OK(b.Build().status());
}

TEST(AutodiffTest, OpsWithoutARuleAreNamed) {
  GraphBuilder body;
  body.MarkOutput(body.Scale(body.Placeholder("s", Shape({{"a", 4}})), 2.0f, "next"));
  v1::Op loop;
  loop.set_type("while_loop");
  *loop.mutable_body() = body.proto();
  (*loop.mutable_attrs())["trip_count"].set_i(2);
  (*loop.mutable_attrs())["carried"].mutable_strings()->add_values("s");
  (*loop.mutable_attrs())["output"].set_i(0);
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 4}}));
  TensorRef loss = b.ReduceSum(b.Apply(loop, {x}, "looped"), {}, "loss");
  EXPECT_TRUE(StatusIs(Gradients(b, loss, {x}).status(), absl::StatusCode::kUnimplemented,
                       {"op 'looped' (while_loop)"}));
}

// Comparisons and other piecewise-constant ops pass back zero, and integer tensors nothing: the
// gradient of sum(x * greater(x, 0) * cast(argmax(x))) is the mask times the argmax.
TEST(AutodiffTest, PiecewiseConstantOpsAndIntegersPassNoGradient) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 4}}));
  v1::Op greater;
  greater.set_type("greater");
  (*greater.mutable_attrs())["scalar"].set_f(0);
  v1::Op argmax;
  argmax.set_type("argmax");
  argmax.add_dims("a");
  v1::Op cast;
  cast.set_type("cast");
  (*cast.mutable_attrs())["dtype"].set_s("float32");
  TensorRef k = b.Apply(cast, {b.Apply(argmax, {x})});
  TensorRef loss = b.ReduceSum(b.Mul(b.Mul(x, b.Apply(greater, {x})), k), {}, "loss");
  ASSERT_OK_AND_ASSIGN(std::vector<TensorRef> grads, Gradients(b, loss, {x}));
  ASSERT_OK_AND_ASSIGN(Graph graph, b.Build());
  TensorMap feeds = {{"x", Tensor::Float(Shape({{"a", 4}}), {0.5f, -1.0f, 2.0f, 0.25f})}};
  ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(graph, feeds, {grads[0].name}));
  EXPECT_EQ(out.at(grads[0].name).floats(),
            absl::MakeConstSpan(std::vector<float>{2.0f, 0.0f, 2.0f, 2.0f}));
}

}  // namespace
}  // namespace meshrt
