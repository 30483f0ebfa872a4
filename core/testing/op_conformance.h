// The checks every one-input elementwise op passes (core/README.md "Adding an op"): a new op's
// test is its closed form and one call. Header-only; tests only.
//
// ExpectUnaryOpConforms(type, want, lo, hi) checks, on inputs drawn from [lo, hi):
//   1. the record: registered, elementwise, one input; with a floating dtype rule an int32 input
//      is refused by shape inference with an error naming the op;
//   2. the reference kernel against `want` (the test's closed form, in double) within 1e-6;
//   3. CpuKernels() (the op's fast kernel when it has one) against the reference within 1e-5;
//   4. its gradient (autodiff, run by the interpreter) against central finite differences;
//   5. layout invariance: the forward and gradient graph lowered on three meshes and layouts
//      (one split dim, two split dims, one dim split 4 ways) and run on the simulated
//      mesh give the interpreter's values.
#ifndef MESHRT_CORE_TESTING_OP_CONFORMANCE_H_
#define MESHRT_CORE_TESTING_OP_CONFORMANCE_H_

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/autodiff.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace op_conformance {

using MathFn = double (*)(double);

inline Tensor Uniform(const Shape& shape, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(DType::kFloat32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng);
  return t;
}

inline v1::Op OneInputOp(const std::string& type) {
  v1::Op op;
  op.set_name("y");
  op.set_type(type);
  op.add_inputs("x");
  return op;
}

inline void ExpectRecord(const std::string& type) {
  const OpInfo* info = FindOp(type);
  ASSERT_NE(info, nullptr) << type << " is not registered";
  EXPECT_EQ(info->family, OpFamily::kElementwise);
  EXPECT_EQ(info->min_inputs, 1);
  EXPECT_EQ(info->max_inputs, 1);
  if (info->input_dtypes == InputDTypes::kFloating) {
    auto refused = InferOutputType(OneInputOp(type), {{Shape::Parse("a:2").value(), DType::kInt32}});
    EXPECT_FALSE(refused.ok()) << type << " accepted an int32 input";
    if (!refused.ok()) {
      EXPECT_NE(std::string(refused.status().message()).find("(" + type + ")"), std::string::npos)
          << refused.status();
    }
  }
}

inline void ExpectKernels(const std::string& type, MathFn want, float lo, float hi) {
  const Tensor x = Uniform(Shape::Parse("a:8,b:16").value(), lo, hi, 5);
  const v1::Op op = OneInputOp(type);
  Tensor ref(DType::kFloat32, x.shape()), fast(DType::kFloat32, x.shape());
  ASSERT_OK(ReferenceKernels().Run(op, {&x}, &ref));
  ASSERT_OK(CpuKernels().Run(op, {&x}, &fast));
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const double w = want(x.f32()[i]);
    EXPECT_NEAR(ref.f32()[i], w, 1e-6 * (1 + std::fabs(w))) << type << " reference at x=" << x.f32()[i];
    EXPECT_NEAR(fast.f32()[i], ref.f32()[i], 1e-5 * (1 + std::fabs(w)))
        << type << " fast kernel at x=" << x.f32()[i];
  }
  // The output's dims in another order (the executor may ask for it): the same values, moved.
  Tensor swapped(DType::kFloat32, Shape::Parse("b:16,a:8").value());
  ASSERT_OK(CpuKernels().Run(op, {&x}, &swapped));
  EXPECT_NEAR(swapped.f32()[1], ref.f32()[16], 1e-5 * (1 + std::fabs(ref.f32()[16])));
}

// loss = reduce_sum(op(x) * w): the forward graph and the one with dloss/dx ("x/grad").
struct Graphs {
  Graph forward, full;
  std::string grad;
};

inline Graphs BuildGraphs(const std::string& type) {
  GraphBuilder b;
  const TensorRef x = b.Placeholder("x", Shape::Parse("a:4,b:6").value());
  const TensorRef w = b.Placeholder("w", x.shape);
  v1::Op op;
  op.set_type(type);
  const TensorRef y = b.Apply(op, {x}, "y");
  b.ReduceSum(b.Mul(y, w), {}, "loss");
  GraphBuilder forward = b;
  Graphs g;
  EXPECT_TRUE(b.status().ok()) << b.status();
  auto grads = Gradients(b, TensorRef{"loss", Shape(), DType::kFloat32}, {x});
  EXPECT_TRUE(grads.ok()) << grads.status();
  if (!grads.ok()) return g;
  auto f = forward.Build();
  auto full = b.Build();
  EXPECT_TRUE(f.ok() && full.ok()) << f.status() << " / " << full.status();
  if (!f.ok() || !full.ok()) return g;
  g.forward = *std::move(f);
  g.full = *std::move(full);
  g.grad = (*grads)[0].name;
  return g;
}

inline void ExpectGradient(const Graphs& g, const TensorMap& feeds) {
  ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(g.full, feeds, {g.grad}));
  const Tensor& analytic = out.at(g.grad);
  const float eps = 1e-2f;
  auto loss = [&](const TensorMap& f) {
    auto r = Interpret(g.forward, f, {"loss"});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? static_cast<double>(r->at("loss").f32()[0]) : 0.0;
  };
  double largest = 0;
  for (int64_t i = 0; i < analytic.num_elements(); ++i) {
    TensorMap plus = feeds, minus = feeds;
    plus["x"].f32()[i] += eps;
    minus["x"].f32()[i] -= eps;
    const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
    EXPECT_NEAR(analytic.f32()[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "x[" << i << "]";
    largest = std::max(largest, std::fabs(numeric));
  }
  EXPECT_GT(largest, 1e-2) << "the loss barely depends on x: the check checks nothing";
}

inline void ExpectLayoutInvariant(const Graphs& g, const TensorMap& feeds) {
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g.full, feeds, {"y", "loss", g.grad}));
  const std::vector<std::pair<std::string, std::string>> layouts = {
      {"x:2", "a:x"}, {"x:2,y:2", "a:x,b:y"}, {"x:4", "a:x"}};
  for (const auto& [mesh_text, rules_text] : layouts) {
    SCOPED_TRACE(mesh_text + " / " + rules_text);
    ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(mesh_text));
    ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(rules_text, mesh));
    ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g.full, mesh, rules));
    SimulatedMeshOptions options;
    options.kernels = &CpuKernels();
    ASSERT_OK_AND_ASSIGN(TensorMap got, RunOnSimulatedMesh(program, feeds, options));
    for (const std::string& name : {std::string("y"), std::string("loss"), g.grad}) {
      EXPECT_LE(MaxRelativeError(got.at(name), want.at(name)), 1e-5) << name;
    }
  }
}

inline void ExpectUnaryOpConforms(const std::string& type, MathFn want, float lo, float hi) {
  SCOPED_TRACE(type);
  ExpectRecord(type);
  ExpectKernels(type, want, lo, hi);
  const Graphs g = BuildGraphs(type);
  if (g.grad.empty()) return;  // BuildGraphs reported why
  TensorMap feeds;
  feeds["x"] = Uniform(Shape::Parse("a:4,b:6").value(), lo, hi, 17);
  feeds["w"] = Uniform(Shape::Parse("a:4,b:6").value(), -1, 1, 19);
  ExpectGradient(g, feeds);
  ExpectLayoutInvariant(g, feeds);
}

}  // namespace op_conformance
}  // namespace meshrt

#endif  // MESHRT_CORE_TESTING_OP_CONFORMANCE_H_
