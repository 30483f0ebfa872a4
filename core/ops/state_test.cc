// Variables, assign and assign_add: initializers (values, statistics, layout invariance), state
// across steps in the interpreter and on the simulated mesh under several layouts, the refused
// graphs, and a failed step changing nothing.
#include "core/ops/ops_state.h"

#include <cmath>

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/autodiff.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

Initializer Init(const std::string& kind, int64_t seed = 7) {
  Initializer init;
  init.kind = kind;
  init.seed = seed;
  return init;
}

const Shape kBig({{"a", 64}, {"b", 128}});

Tensor InitialValue(const Initializer& init, const Shape& shape = kBig) {
  GraphBuilder b;
  TensorRef v = b.Variable("v", shape, init);
  b.MarkOutput(v);
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  auto out = Interpret(*g, {});
  EXPECT_TRUE(out.ok()) << out.status();
  return out->at("v");
}

void Moments(const Tensor& t, double* mean, double* stddev, double* lo, double* hi) {
  double s = 0, s2 = 0;
  *lo = 1e30;
  *hi = -1e30;
  for (float x : t.floats()) {
    s += x;
    s2 += x * x;
    *lo = std::min<double>(*lo, x);
    *hi = std::max<double>(*hi, x);
  }
  const double n = t.num_elements();
  *mean = s / n;
  *stddev = std::sqrt(s2 / n - *mean * *mean);
}

TEST(StateTest, InitializerValuesAndStatistics) {
  double mean, sd, lo, hi;
  Moments(InitialValue(Init("zeros")), &mean, &sd, &lo, &hi);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 0);
  Moments(InitialValue(Init("ones")), &mean, &sd, &lo, &hi);
  EXPECT_EQ(lo, 1);
  EXPECT_EQ(hi, 1);
  Initializer c = Init("constant");
  c.value = -2.5f;
  Moments(InitialValue(c), &mean, &sd, &lo, &hi);
  EXPECT_EQ(lo, -2.5);
  EXPECT_EQ(hi, -2.5);

  Initializer u = Init("uniform");
  u.minval = -3;
  u.maxval = 1;
  Moments(InitialValue(u), &mean, &sd, &lo, &hi);
  EXPECT_NEAR(mean, -1, 0.05);
  EXPECT_NEAR(sd, 4 / std::sqrt(12.0), 0.03);
  EXPECT_GE(lo, -3);
  EXPECT_LT(hi, 1);

  Initializer n = Init("normal");
  n.mean = 0.5f;
  n.stddev = 2;
  Moments(InitialValue(n), &mean, &sd, &lo, &hi);
  EXPECT_NEAR(mean, 0.5, 0.06);
  EXPECT_NEAR(sd, 2, 0.05);
  EXPECT_LT(lo, 0.5 - 2 * 2.5);  // tails beyond 2.5 sd exist in 8192 normal draws

  Initializer t = Init("truncated_normal");
  t.stddev = 2;
  Moments(InitialValue(t), &mean, &sd, &lo, &hi);
  EXPECT_GE(lo, -4.0);
  EXPECT_LE(hi, 4.0);
  EXPECT_NEAR(sd, 2 * 0.88, 0.06);  // a normal cut at 2 sd has sd 0.88
  EXPECT_NEAR(mean, 0, 0.06);

  // glorot over [a:64, b:128]: fan_in 64, fan_out 128.
  Moments(InitialValue(Init("glorot_uniform")), &mean, &sd, &lo, &hi);
  const double limit = std::sqrt(6.0 / 192);
  EXPECT_GE(lo, -limit);
  EXPECT_LE(hi, limit);
  EXPECT_NEAR(sd, limit / std::sqrt(3.0), 0.01);
  Moments(InitialValue(Init("glorot_normal")), &mean, &sd, &lo, &hi);
  EXPECT_NEAR(sd, std::sqrt(2.0 / 192), 0.005);

  // Seeds and names select independent streams.
  EXPECT_GT(MaxRelativeError(InitialValue(Init("normal", 1)), InitialValue(Init("normal", 2))),
            0.1);
}

TEST(StateTest, InitialValuesAreLayoutInvariant) {
  GraphBuilder b;
  const Shape shape({{"a", 8}, {"b", 12}});
  std::vector<TensorRef> vars;
  for (const char* kind : {"uniform", "normal", "truncated_normal", "glorot_uniform",
                           "glorot_normal", "constant", "ones"}) {
    vars.push_back(b.Variable(std::string("v_") + kind, shape, Init(kind)));
    b.MarkOutput(vars.back());
  }
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, {}));
  for (const auto& [mesh_text, rules_text] :
       std::vector<std::pair<std::string, std::string>>{
           {"x:2", "a:x"}, {"x:4", "b:x"}, {"r:2,c:2", "a:r,b:c"}, {"r:2,c:2", "b:r"}}) {
    SCOPED_TRACE(mesh_text + " " + rules_text);
    ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(mesh_text));
    ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(rules_text, mesh));
    ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
    ASSERT_OK_AND_ASSIGN(auto got, RunOnSimulatedMesh(program, {}, {&CpuKernels()}));
    for (const TensorRef& v : vars) {
      EXPECT_EQ(MaxRelativeError(got.at(v.name), want.at(v.name)), 0) << v.name;
    }
  }
}

// Linear regression trained by SGD: w <- w - lr * dloss/dw, a step counter by assign_add.
struct Regression {
  GraphBuilder b;
  TensorRef x, y, w, step, loss;
};

void BuildRegression(Regression* m) {
  GraphBuilder& b = m->b;
  m->x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 4}}));
  m->y = b.Placeholder("y", Shape({{"batch", 8}, {"d_out", 6}}));
  Initializer init = Init("glorot_uniform", 3);
  m->w = b.Variable("w", Shape({{"d_in", 4}, {"d_out", 6}}), init);
  m->step = b.Variable("step", Shape({}));
  TensorRef pred = b.Einsum({m->x, m->w}, Shape({{"batch", 8}, {"d_out", 6}}));
  TensorRef err = b.Sub(pred, m->y);
  m->loss = b.ReduceMean(b.Mul(err, err), {}, "loss");
  auto grads = Gradients(b, m->loss, {m->w});
  ASSERT_TRUE(grads.ok()) << grads.status();
  b.Assign(m->w, b.Sub(m->w, b.Scale((*grads)[0], 0.1f)), "update_w");
  b.AssignAdd(m->step, b.Apply([] {
    v1::Op op;
    op.set_type("ones");
    return op;
  }(), {}, "one"), "count");
  b.MarkOutput(m->loss);
}

TEST(StateTest, TrainingStepsMatchTheInterpreterOnEveryLayout) {
  Regression m;
  BuildRegression(&m);
  ASSERT_OK_AND_ASSIGN(Graph g, m.b.Build());
  std::vector<TensorMap> feeds;
  for (int s = 0; s < 5; ++s) {
    Tensor x(DType::kFloat32, m.x.shape), y(DType::kFloat32, m.y.shape);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] = std::sin(0.37f * (i + 11 * s));
    for (int64_t i = 0; i < y.num_elements(); ++i) y.f32()[i] = std::cos(0.23f * (i + 7 * s));
    feeds.push_back({{"x", x}, {"y", y}});
  }
  TensorMap state;
  std::vector<float> want_loss;
  for (const TensorMap& f : feeds) {
    ASSERT_OK_AND_ASSIGN(TensorMap out, InterpretStep(g, f, {"loss", "w"}, &state));
    want_loss.push_back(out.at("loss").f32()[0]);
  }
  EXPECT_LT(want_loss.back(), want_loss.front());  // SGD makes progress
  EXPECT_EQ(state.at("step").f32()[0], 5);

  for (const auto& [mesh_text, rules_text] :
       std::vector<std::pair<std::string, std::string>>{{"x:1", ""},
                                                         {"x:2", "batch:x"},
                                                         {"x:2", "d_out:x"},
                                                         {"x:2", "d_in:x"},
                                                         {"r:2,c:2", "batch:r,d_out:c"},
                                                         {"r:2,c:2", "d_in:r,batch:c"}}) {
    SCOPED_TRACE(mesh_text + " " + rules_text);
    ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(mesh_text));
    ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(rules_text, mesh));
    ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
    ASSERT_EQ(program.variables_size(), 2);
    ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(program, {&CpuKernels()}));
    for (size_t s = 0; s < feeds.size(); ++s) {
      ASSERT_OK_AND_ASSIGN(auto out, sim->Step(feeds[s], {"loss"}));
      EXPECT_NEAR(out.at("loss").f32()[0], want_loss[s], 1e-5 * (1 + std::abs(want_loss[s])))
          << "step " << s;
    }
    ASSERT_OK_AND_ASSIGN(auto vars, sim->Variables());
    EXPECT_LT(MaxRelativeError(vars.at("w"), state.at("w")), 1e-5);
    EXPECT_EQ(vars.at("step").f32()[0], 5);
  }
}

TEST(StateTest, ReadsSeeTheStartOfTheStepAndFetchesSeeBothValues) {
  GraphBuilder b;
  TensorRef v = b.Variable("v", Shape({{"n", 4}}), Init("ones"));
  TensorRef doubled = b.Assign(v, b.Scale(v, 2.0f), "doubled");
  TensorRef read_after = b.Add(v, v, "read");  // still the old value: 1 + 1
  TensorRef copy = b.Variable("copy", Shape({{"n", 4}}));
  b.Assign(copy, v, "copy_old");  // takes v's value at the start of the step
  b.MarkOutput(doubled);
  b.MarkOutput(read_after);
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("x:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("n:x", mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
  ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(program, {&CpuKernels()}));
  TensorMap state;
  for (int step = 1; step <= 3; ++step) {
    ASSERT_OK_AND_ASSIGN(auto want, InterpretStep(g, {}, {"v", "doubled", "read"}, &state));
    ASSERT_OK_AND_ASSIGN(auto got, sim->Step({}, {"v", "doubled", "read", "copy_old"}));
    const float old = std::pow(2.0f, step - 1);
    EXPECT_EQ(want.at("v").f32()[0], old);
    EXPECT_EQ(got.at("v").f32()[0], old);
    EXPECT_EQ(got.at("doubled").f32()[3], 2 * old);
    EXPECT_EQ(got.at("read").f32()[2], 2 * old);
    EXPECT_EQ(got.at("copy_old").f32()[1], old);
  }
  ASSERT_OK_AND_ASSIGN(auto vars, sim->Variables());
  EXPECT_EQ(vars.at("v").f32()[0], 8);
  EXPECT_EQ(vars.at("copy").f32()[0], 4);
  EXPECT_EQ(state.at("v").f32()[0], 8);
  EXPECT_EQ(state.at("copy").f32()[0], 4);

  // SetVariables replaces the slices; a wrong shape is refused naming the variable.
  ASSERT_OK(sim->SetVariables({{"v", Tensor::Float(Shape({{"n", 4}}), {5, 6, 7, 8})}}));
  ASSERT_OK_AND_ASSIGN(auto got, sim->Step({}, {"doubled"}));
  EXPECT_EQ(got.at("doubled").f32()[3], 16);
  EXPECT_TRUE(StatusIs(StatusOf(sim->SetVariables({{"v", Tensor::Float(Shape({{"n", 2}}), {1, 2})}})), absl::StatusCode::kInvalidArgument, {"variable 'v'"}));
  EXPECT_TRUE(StatusIs(StatusOf(sim->SetVariables({{"nope", Tensor::Float(Shape({{"n", 2}}), {1, 2})}})), absl::StatusCode::kNotFound, {"nope"}));
}

TEST(StateTest, RefusesBadStateGraphs) {
  {
    GraphBuilder b;
    TensorRef p = b.Placeholder("p", Shape({{"n", 2}}));
    b.Assign(p, p, "bad");
    EXPECT_TRUE(StatusIs(StatusOf(b.Build()), absl::StatusCode::kInvalidArgument, {"updates 'p', which is a placeholder"}));
  }
  {
    GraphBuilder b;
    TensorRef v = b.Variable("v", Shape({{"n", 2}}));
    b.Assign(v, v, "first");
    b.AssignAdd(v, v, "second");
    EXPECT_TRUE(StatusIs(StatusOf(b.Build()), absl::StatusCode::kInvalidArgument, {"'v' is updated twice in one graph, by 'first' and "
                                              "by 'second'"}));
  }
  {
    GraphBuilder b;
    TensorRef v = b.Variable("v", Shape({{"n", 2}}));
    b.Assign(v, b.Placeholder("q", Shape({{"n", 3}})), "wrong");
    EXPECT_TRUE(StatusIs(StatusOf(b.status()), absl::StatusCode::kInvalidArgument, {"variable 'v' is"}));
  }
  {
    GraphBuilder b;
    b.Variable("v", Shape({{"n", 2}}), Init("xavier"));
    EXPECT_TRUE(StatusIs(StatusOf(b.status()), absl::StatusCode::kInvalidArgument, {"unknown initializer 'xavier'"}));
  }
  {
    GraphBuilder b;
    b.Variable("v", Shape({{"n", 2}}), Init("normal"), DType::kInt32);
    EXPECT_TRUE(StatusIs(StatusOf(b.status()), absl::StatusCode::kInvalidArgument, {"float32"}));
  }
}

TEST(StateTest, AFailedStepChangesNoVariable) {
  GraphBuilder b;
  TensorRef v = b.Variable("v", Shape({{"n", 4}}), Init("ones"));
  TensorRef x = b.Placeholder("x", Shape({{"n", 4}}));
  v1::Op bad;
  bad.set_type("cast");
  (*bad.mutable_attrs())["dtype"].set_s("float32");
  b.AssignAdd(v, b.Apply(bad, {x}), "acc");
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("x:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("n:x", mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
  // Make processor 1's add fail: a kernel runner that refuses the second add it sees would be
  // nondeterministic, so corrupt the program instead (an instruction reading an unwritten buffer
  // runs after the update is computed).
  v1::Program broken = program;
  v1::Instruction* extra = broken.add_instructions();
  *extra = broken.instructions(broken.instructions_size() - 2);
  extra->set_output(broken.num_buffers());
  extra->clear_inputs();
  extra->add_inputs(broken.num_buffers() + 5);
  broken.set_num_buffers(broken.num_buffers() + 1);
  ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(broken, {&CpuKernels()}));
  const Tensor ones = Tensor::Float(Shape({{"n", 4}}), {1, 1, 1, 1});
  EXPECT_TRUE(StatusIs(StatusOf(sim->Step({{"x", ones}})), absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(auto vars, sim->Variables());
  EXPECT_EQ(vars.at("v").f32()[0], 1);  // initialised, not incremented

  ASSERT_OK_AND_ASSIGN(auto good, SimulatedMesh::Create(program, {&CpuKernels()}));
  ASSERT_OK(good->Step({{"x", ones}}).status());
  ASSERT_OK(good->Step({{"x", ones}}).status());
  ASSERT_OK_AND_ASSIGN(vars, good->Variables());
  EXPECT_EQ(vars.at("v").f32()[3], 3);
}

}  // namespace
}  // namespace meshrt
