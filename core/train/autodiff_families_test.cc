// Gradient rules of every differentiable op family (elementwise, reduce/norm, data, index,
// spatial, random/dropout): each op's gradient of a scalar loss, reduce_sum(op(...) * fixed random
// weights), against central finite differences of the reference interpreter, w.r.t. every
// differentiable input; and, for a few ops whose gradients move data between processors, the
// lowered gradient graph on the simulated mesh under several layouts with split dims against the
// interpreter.
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/lowering/lowering.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/autodiff.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

// ---- ops ---------------------------------------------------------------------------------------

v1::AttrValue I(int64_t v) {
  v1::AttrValue a;
  a.set_i(v);
  return a;
}
v1::AttrValue F(float v) {
  v1::AttrValue a;
  a.set_f(v);
  return a;
}
v1::AttrValue S(const std::string& v) {
  v1::AttrValue a;
  a.set_s(v);
  return a;
}
v1::AttrValue B(bool v) {
  v1::AttrValue a;
  a.set_b(v);
  return a;
}
v1::AttrValue Ints(const std::vector<int64_t>& v) {
  v1::AttrValue a;
  for (int64_t x : v) a.mutable_ints()->add_values(x);
  return a;
}

v1::Op Op(const std::string& type, const std::vector<std::string>& dims = {},
          const std::map<std::string, v1::AttrValue>& attrs = {}) {
  v1::Op op;
  op.set_type(type);
  for (const std::string& d : dims) op.add_dims(d);
  for (const auto& [k, v] : attrs) (*op.mutable_attrs())[k] = v;
  return op;
}

// ---- feeds -------------------------------------------------------------------------------------

// How a placeholder is filled. Inputs of ops with kinks (abs, max, pools, top_k, sort) are kept
// away from them by more than the finite-difference step.
struct Fill {
  enum Kind {
    kUniform,       // uniform in [lo, hi)
    kAwayFromZero,  // +-[0.2, 1)
    kDistinct,      // a shuffle of lo + 0.07 k: any two differ by >= 0.07
    kInt,           // int32, uniform in [lo, hi]
    kZeroFirst,     // kUniform with element 0 set to 0
  };
  Kind kind = kUniform;
  float lo = -1, hi = 1;
};

Fill Uniform(float lo, float hi) { return Fill{Fill::kUniform, lo, hi}; }
Fill AwayFromZero() { return Fill{Fill::kAwayFromZero}; }
Fill Distinct(float offset = 0.01f) { return Fill{Fill::kDistinct, offset, 0}; }
Fill IntFill(int lo, int hi) {
  return Fill{Fill::kInt, static_cast<float>(lo), static_cast<float>(hi)};
}

TensorMap MakeFeeds(const Graph& g, const std::map<std::string, Fill>& fills, uint32_t seed) {
  std::mt19937 rng(seed);
  TensorMap feeds;
  for (const std::string& p : g.Placeholders()) {
    const TensorType& type = g.type(p);
    Tensor t(type.dtype, type.shape);
    const int64_t n = t.num_elements();
    const Fill fill = fills.count(p) ? fills.at(p) : Fill{};
    if (fill.kind == Fill::kInt) {
      std::uniform_int_distribution<int> dist(static_cast<int>(fill.lo), static_cast<int>(fill.hi));
      for (int64_t i = 0; i < n; ++i) t.i32()[i] = dist(rng);
    } else if (fill.kind == Fill::kDistinct) {
      std::vector<int64_t> order(n);
      for (int64_t i = 0; i < n; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (int64_t i = 0; i < n; ++i) t.f32()[i] = fill.lo + 0.07f * (order[i] - n / 2);
    } else {
      std::uniform_real_distribution<float> dist(fill.lo, fill.hi);
      std::uniform_real_distribution<float> mag(0.2f, 1.0f);
      for (int64_t i = 0; i < n; ++i) {
        t.f32()[i] = fill.kind == Fill::kAwayFromZero ? (rng() % 2 ? 1 : -1) * mag(rng) : dist(rng);
      }
      if (fill.kind == Fill::kZeroFirst) t.f32()[0] = 0;
    }
    feeds[p] = std::move(t);
  }
  return feeds;
}

// ---- cases -------------------------------------------------------------------------------------

struct Case {
  std::string name;
  // Adds the op under test on placeholders it makes, puts the differentiable inputs in `params`,
  // and returns the op's output.
  std::function<TensorRef(GraphBuilder&, std::vector<TensorRef>*)> build;
  std::map<std::string, Fill> fills;  // by placeholder name; default kUniform [-1, 1)
};

struct Built {
  Graph forward;  // the loss only (for the finite differences)
  Graph full;     // with the gradients
  std::vector<TensorRef> params, grads;
};

// loss = reduce_sum(op(...) * w), w a fed random tensor of the op's output shape.
Built Build(const Case& c) {
  Built out;
  GraphBuilder b;
  const TensorRef y = c.build(b, &out.params);
  const TensorRef w = b.Placeholder("loss_w", y.shape);
  b.ReduceSum(b.Mul(y, w), {}, "loss");
  GraphBuilder forward = b;
  auto grads = Gradients(b, TensorRef{"loss", Shape(), DType::kFloat32}, out.params);
  EXPECT_TRUE(grads.ok()) << c.name << ": " << grads.status();
  if (!grads.ok()) return out;
  out.grads = *grads;
  auto fg = forward.Build();
  auto g = b.Build();
  EXPECT_TRUE(fg.ok() && g.ok()) << c.name << ": " << fg.status() << " / " << g.status();
  if (fg.ok()) out.forward = *std::move(fg);
  if (g.ok()) out.full = *std::move(g);
  return out;
}

// |analytic - numeric| <= 2e-3 + 2e-2 |numeric| for every element of every param, numeric by
// central differences with step `eps`. Returns how many elements were checked.
int ExpectMatchesFiniteDifferences(const Case& c, float eps = 1e-2f) {
  SCOPED_TRACE(c.name);
  const Built m = Build(c);
  if (m.grads.size() != m.params.size() || m.params.empty()) {
    ADD_FAILURE() << "no gradients";
    return 0;
  }
  const TensorMap feeds = MakeFeeds(m.full, c.fills, 17);
  std::vector<std::string> fetches;
  for (const TensorRef& g : m.grads) fetches.push_back(g.name);
  auto out = Interpret(m.full, feeds, fetches);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return 0;
  auto loss = [&](const TensorMap& f) {
    auto r = Interpret(m.forward, f, {"loss"});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? static_cast<double>(r->at("loss").f32()[0]) : 0.0;
  };
  int checked = 0;
  for (size_t p = 0; p < m.params.size(); ++p) {
    const Tensor& analytic = out->at(m.grads[p].name);
    EXPECT_EQ(analytic.shape(), m.params[p].shape) << m.params[p].name;
    if (analytic.shape() != m.params[p].shape) continue;
    double largest = 0;
    for (int64_t i = 0; i < analytic.num_elements(); ++i) {
      TensorMap plus = feeds, minus = feeds;
      plus[m.params[p].name].f32()[i] += eps;
      minus[m.params[p].name].f32()[i] -= eps;
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      EXPECT_NEAR(analytic.f32()[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << m.params[p].name << "[" << i << "]";
      largest = std::max(largest, std::fabs(numeric));
      ++checked;
    }
    // A gradient that is zero everywhere would check nothing.
    EXPECT_GT(largest, 1e-2) << m.params[p].name << ": the loss barely depends on it";
  }
  return checked;
}

void CheckAll(const std::vector<Case>& cases) {
  for (const Case& c : cases) EXPECT_GT(ExpectMatchesFiniteDifferences(c), 0) << c.name;
}

// The lowered gradient graph, run on the simulated mesh, gives the interpreter's gradients.
void ExpectLayoutInvariant(const Case& c,
                           const std::vector<std::pair<std::string, std::string>>& layouts) {
  SCOPED_TRACE(c.name);
  const Built m = Build(c);
  ASSERT_EQ(m.grads.size(), m.params.size());
  const TensorMap feeds = MakeFeeds(m.full, c.fills, 23);
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(m.full, feeds));
  for (const auto& [mesh_text, layout_text] : layouts) {
    SCOPED_TRACE(mesh_text + " / " + layout_text);
    ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(mesh_text));
    ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(layout_text, mesh));
    ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(m.full, mesh, rules));
    SimulatedMeshOptions options;
    options.kernels = &CpuKernels();
    ASSERT_OK_AND_ASSIGN(TensorMap got, RunOnSimulatedMesh(program, feeds, options));
    for (const TensorRef& g : m.grads) {
      EXPECT_LE(MaxRelativeError(got.at(g.name), want.at(g.name)), 1e-5) << g.name;
    }
  }
}

// Builders of one-op cases.
using Dims = std::vector<Dim>;

// op(x) for one float placeholder x.
Case Unary(const std::string& name, v1::Op op, const Dims& x, Fill fill = {}) {
  return Case{name,
              [op, x](GraphBuilder& b, std::vector<TensorRef>* params) {
                params->push_back(b.Placeholder("x", Shape(x)));
                return b.Apply(op, {params->back()});
              },
              {{"x", fill}}};
}

// op(x, y) for two float placeholders.
Case Binary(const std::string& name, v1::Op op, const Dims& x, const Dims& y, Fill fx = {},
            Fill fy = {}) {
  return Case{name,
              [op, x, y](GraphBuilder& b, std::vector<TensorRef>* params) {
                params->push_back(b.Placeholder("x", Shape(x)));
                params->push_back(b.Placeholder("y", Shape(y)));
                return b.Apply(op, {(*params)[0], (*params)[1]});
              },
              {{"x", fx}, {"y", fy}}};
}

v1::Op WithScalar(const std::string& type, float s, bool first = false) {
  v1::Op op = Op(type, {}, {{"scalar", F(s)}});
  if (first) (*op.mutable_attrs())["scalar_first"] = B(true);
  return op;
}

const Dims kAB = {{"a", 4}, {"b", 3}};

// ---- elementwise ---------------------------------------------------------------------------------

TEST(AutodiffFamiliesTest, Elementwise) {
  const Fill positive = Uniform(0.5f, 1.5f);
  CheckAll({
      Unary("abs", Op("abs"), kAB, AwayFromZero()),
      Unary("cast", Op("cast", {}, {{"dtype", S("float32")}}), kAB),
      Unary("gelu_tanh", Op("gelu"), kAB, Uniform(-2.5f, 2.5f)),
      Unary("gelu_erf", Op("gelu", {}, {{"approximate", B(false)}}), kAB,
            Fill{Fill::kZeroFirst, -2.5f, 2.5f}),
      Unary("reciprocal", Op("reciprocal"), kAB, positive),
      Unary("rsqrt", Op("rsqrt"), kAB, positive),
      Binary("maximum", Op("maximum"), kAB, {{"b", 3}}, Distinct(0.01f), Distinct(0.045f)),
      Binary("minimum", Op("minimum"), kAB, kAB, Distinct(0.01f), Distinct(0.045f)),
      Unary("maximum_scalar_first", WithScalar("maximum", 0.25f, true), kAB, Distinct()),
      Unary("minimum_scalar", WithScalar("minimum", -0.25f), kAB, Distinct()),
      Binary("pow", Op("pow"), kAB, {{"b", 3}}, positive),
      Unary("pow_scalar", WithScalar("pow", 2.5f), kAB, positive),
      Unary("pow_scalar_first", WithScalar("pow", 1.7f, true), kAB),
      Unary("div_scalar", WithScalar("div", 3.0f), kAB),
      Unary("div_scalar_first", WithScalar("div", 2.0f, true), kAB, positive),
      Unary("sub_scalar_first", WithScalar("sub", 2.0f, true), kAB),
      // where(cond, x, y) with cond int32 (no gradient) and y broadcast over a.
      Case{"where",
           [](GraphBuilder& b, std::vector<TensorRef>* params) {
             TensorRef c = b.Placeholder("c", Shape(kAB), DType::kInt32);
             params->push_back(b.Placeholder("x", Shape(kAB)));
             params->push_back(b.Placeholder("y", Shape({{"b", 3}})));
             return b.Apply(Op("where"), {c, (*params)[0], (*params)[1]});
           },
           {{"c", IntFill(0, 1)}}},
      // where(x > 0, x * y, 0.5): the condition comes from x through a comparison (no gradient).
      Case{"where_scalar",
           [](GraphBuilder& b, std::vector<TensorRef>* params) {
             TensorRef x = b.Placeholder("x", Shape(kAB));
             TensorRef y = b.Placeholder("y", Shape(kAB));
             *params = {x, y};
             return b.Apply(WithScalar("where", 0.5f),
                            {b.Apply(WithScalar("greater", 0.0f), {x}), b.Mul(x, y)});
           },
           {{"x", AwayFromZero()}}},
      // x * cast(k) with k int32: the int input of the cast gets no gradient.
      Case{"cast_int_input",
           [](GraphBuilder& b, std::vector<TensorRef>* params) {
             TensorRef k = b.Placeholder("k", Shape(kAB), DType::kInt32);
             params->push_back(b.Placeholder("x", Shape(kAB)));
             return b.Mul(params->back(), b.Apply(Op("cast", {}, {{"dtype", S("float32")}}), {k}));
           },
           {{"k", IntFill(-3, 3)}}},
  });
}

// Dropout's gradient applies the forward op's mask: with rate 0.5 a gradient with any other mask
// fails the finite differences on about half the elements.
TEST(AutodiffFamiliesTest, DropoutAppliesTheForwardMask) {
  const Case c = Unary("dropout", Op("dropout", {}, {{"rate", F(0.5f)}, {"seed", I(7)}}),
                       {{"a", 4}, {"b", 6}});
  EXPECT_EQ(ExpectMatchesFiniteDifferences(c), 24);
  ExpectLayoutInvariant(c, {{"p:2", "b:p"}, {"r:2,s:2", "a:r,b:s"}});
}

// ---- reductions and normalisations -----------------------------------------------------------------

Case LayerNorm() {
  return Case{"layer_norm",
              [](GraphBuilder& b, std::vector<TensorRef>* params) {
                *params = {b.Placeholder("x", Shape({{"a", 4}, {"b", 6}})),
                           b.Placeholder("scale", Shape({{"b", 6}})),
                           b.Placeholder("bias", Shape({{"b", 6}}))};
                return b.Apply(Op("layer_norm", {"b"}, {{"epsilon", F(1e-5f)}}), *params);
              },
              {{"x", Uniform(-2, 2)}}};
}

Case RmsNorm() {
  return Case{"rms_norm",
              [](GraphBuilder& b, std::vector<TensorRef>* params) {
                *params = {b.Placeholder("x", Shape({{"a", 4}, {"b", 6}})),
                           b.Placeholder("scale", Shape({{"b", 6}}))};
                return b.Apply(Op("rms_norm", {"b"}, {{"epsilon", F(1e-5f)}}), *params);
              },
              {}};
}

// A scale over a kept dim (a): layer_norm_grad does not take it, so the primitive chain runs.
Case LayerNormScaleOverKeptDim() {
  return Case{"layer_norm_scale_over_kept_dim",
              [](GraphBuilder& b, std::vector<TensorRef>* params) {
                *params = {b.Placeholder("x", Shape({{"a", 4}, {"b", 6}})),
                           b.Placeholder("scale", Shape({{"a", 4}})),
                           b.Placeholder("bias", Shape({{"b", 6}}))};
                return b.Apply(Op("layer_norm", {"b"}, {{"epsilon", F(1e-5f)}}), *params);
              },
              {{"x", Uniform(-2, 2)}}};
}

// The normalised dim outermost, with a scale over it (the fast kernel's transposing path).
Case LayerNormOuterDim() {
  return Case{"layer_norm_outer_dim",
              [](GraphBuilder& b, std::vector<TensorRef>* params) {
                *params = {b.Placeholder("x", Shape({{"a", 6}, {"b", 4}})),
                           b.Placeholder("scale", Shape({{"a", 6}}))};
                return b.Apply(Op("layer_norm", {"a"}, {{"epsilon", F(1e-5f)}}), *params);
              },
              {{"x", Uniform(-2, 2)}}};
}

// Every case's dy has x's shape, so all but the scale-over-a-kept-dim ones take the fused
// layer_norm_grad / rms_norm_grad.
TEST(AutodiffFamiliesTest, ReduceAndNorm) {
  CheckAll({
      Unary("reduce_logsumexp", Op("reduce_logsumexp", {"b"}), kAB, Uniform(-2, 2)),
      Unary("reduce_max", Op("reduce_max", {"b"}), kAB, Distinct()),
      Unary("reduce_min_all", Op("reduce_min"), kAB, Distinct()),
      LayerNorm(),
      // Two normalised dims, a scale over one of them, no bias.
      Case{"layer_norm_two_dims",
           [](GraphBuilder& b, std::vector<TensorRef>* params) {
             *params = {b.Placeholder("x", Shape({{"a", 2}, {"b", 3}, {"c", 4}})),
                        b.Placeholder("scale", Shape({{"c", 4}}))};
             return b.Apply(Op("layer_norm", {"b", "c"}), *params);
           },
           {}},
      RmsNorm(),
      Unary("rms_norm_no_scale", Op("rms_norm", {"a", "b"}), kAB),
      Unary("layer_norm_no_scale_outer", Op("layer_norm", {"a"}), kAB, Uniform(-2, 2)),
      LayerNormOuterDim(),
      LayerNormScaleOverKeptDim(),
      // A scale over kept and normalised dims: the primitive chain for rms_norm.
      Case{"rms_norm_scale_over_all_dims",
           [](GraphBuilder& b, std::vector<TensorRef>* params) {
             *params = {b.Placeholder("x", Shape({{"a", 4}, {"b", 6}})),
                        b.Placeholder("scale", Shape({{"b", 6}, {"a", 4}}))};
             return b.Apply(Op("rms_norm", {"b"}), *params);
           },
           {}},
  });
}

// Op types (with counts) of the ops the gradients add to the forward graph.
std::map<std::string, int> BackwardOps(const Built& m) {
  std::set<std::string> forward;
  for (const v1::Op& op : m.forward.proto().ops()) forward.insert(op.name());
  std::map<std::string, int> counts;
  for (const v1::Op& op : m.full.proto().ops()) {
    if (!forward.count(op.name())) ++counts[op.type()];
  }
  return counts;
}

TEST(AutodiffFamiliesTest, NormBackwardIsOneFusedOpWhenTheScaleSpansNormalisedDims) {
  // layer_norm(x, scale, bias): dx is one layer_norm_grad; dscale needs xhat, one layer_norm
  // (no scale or bias) times dy, summed over a; no primitive normalisation pieces remain.
  std::map<std::string, int> ops = BackwardOps(Build(LayerNorm()));
  EXPECT_EQ(ops["layer_norm_grad"], 1);
  EXPECT_EQ(ops["layer_norm"], 1);
  for (const char* piece : {"rsqrt", "reduce_mean", "square", "sub", "rms_norm_grad"}) {
    EXPECT_EQ(ops.count(piece), 0) << piece;
  }
  const Built rms = Build(RmsNorm());
  ops = BackwardOps(rms);
  EXPECT_EQ(ops["rms_norm_grad"], 1);
  EXPECT_EQ(ops["rms_norm"], 1);
  EXPECT_EQ(ops.count("rsqrt"), 0);
  // The grad op carries the forward's dims and epsilon, and takes x, scale, dy.
  for (const v1::Op& op : rms.full.proto().ops()) {
    if (op.type() != "rms_norm_grad") continue;
    EXPECT_EQ(std::vector<std::string>(op.dims().begin(), op.dims().end()),
              std::vector<std::string>{"b"});
    EXPECT_FLOAT_EQ(op.attrs().at("epsilon").f(), 1e-5f);
    ASSERT_EQ(op.inputs_size(), 3);
    EXPECT_EQ(op.inputs(0), "x");
    EXPECT_EQ(op.inputs(1), "scale");
  }
  // A scale over a kept dim: the primitive chain, no fused op.
  ops = BackwardOps(Build(LayerNormScaleOverKeptDim()));
  EXPECT_EQ(ops.count("layer_norm_grad"), 0);
  EXPECT_EQ(ops["rsqrt"], 1);
}

// ---- data movement -----------------------------------------------------------------------------

Case SliceConcat() {
  // concat(slice(x), y) with y's other dim in another order: both rules and a transpose.
  return Case{"slice_concat",
              [](GraphBuilder& b, std::vector<TensorRef>* params) {
                TensorRef x = b.Placeholder("x", Shape({{"a", 4}, {"b", 6}}));
                TensorRef y = b.Placeholder("y", Shape({{"c", 2}, {"a", 4}}));
                *params = {x, y};
                TensorRef s = b.Apply(
                    Op("slice", {"b"}, {{"begin", I(1)}, {"size", I(4)}, {"new_dim", S("bs")}}),
                    {x});
                return b.Apply(Op("concat", {"bs", "c"}, {{"new_dim", S("bc")}}), {s, y});
              },
              {}};
}

TEST(AutodiffFamiliesTest, DataMovement) {
  const Dims x = {{"a", 4}, {"b", 6}};
  CheckAll({
      Unary("replace_dims", [] {
        v1::Op op = Op("replace_dims", {"b"});
        *op.mutable_shape() = Shape({{"p", 2}, {"q", 3}}).ToProto();
        return op;
      }(), x),
      Unary("slice", Op("slice", {"b"}, {{"begin", I(1)}, {"size", I(3)}, {"new_dim", S("bs")}}),
            x),
      Unary("pad", Op("pad", {"a"}, {{"before", I(1)}, {"after", I(2)}, {"new_dim", S("ap")}}), x),
      SliceConcat(),
      Unary("split", Op("split", {"b"}, {{"sizes", Ints({2, 4})}, {"index", I(1)},
                                         {"new_dim", S("b2")}}), x),
      Binary("stack", Op("stack", {}, {{"new_dim", S("s")}, {"axis", I(1)}}), kAB, kAB),
      Unary("unstack", Op("unstack", {"s"}, {{"index", I(1)}}), {{"a", 4}, {"s", 3}, {"b", 2}}),
  });
}

// ---- indexing ----------------------------------------------------------------------------------

Case Gather() {
  // Repeated and out-of-range indices (-1 and 6 select nothing).
  return Case{"gather",
              [](GraphBuilder& b, std::vector<TensorRef>* params) {
                params->push_back(b.Placeholder("w", Shape({{"v", 6}, {"d", 4}})));
                TensorRef i = b.Placeholder("i", Shape({{"n", 8}}), DType::kInt32);
                return b.Apply(Op("gather", {"v"}), {params->back(), i});
              },
              {{"i", IntFill(-1, 6)}}};
}

TEST(AutodiffFamiliesTest, Indexing) {
  CheckAll({
      Gather(),
      // Batch dim n in weights and indices: each batch element reads its own weights.
      Case{"gather_batch",
           [](GraphBuilder& b, std::vector<TensorRef>* params) {
             params->push_back(b.Placeholder("w", Shape({{"n", 2}, {"v", 5}, {"d", 3}})));
             TensorRef i = b.Placeholder("i", Shape({{"n", 2}, {"m", 3}}), DType::kInt32);
             return b.Apply(Op("gather", {"v"}), {params->back(), i});
           },
           {{"i", IntFill(0, 4)}}},
      // row_ids name the weights' rows 3..6; indices 2 and 7 select nothing.
      Case{"gather_row_ids",
           [](GraphBuilder& b, std::vector<TensorRef>* params) {
             params->push_back(b.Placeholder("w", Shape({{"v", 4}, {"d", 2}})));
             TensorRef i = b.Placeholder("i", Shape({{"n", 6}}), DType::kInt32);
             TensorRef ids = b.Constant(Tensor::Int(Shape({{"v", 4}}), {3, 4, 5, 6}));
             return b.Apply(Op("gather", {"v"}), {params->back(), i, ids});
           },
           {{"i", IntFill(2, 7)}}},
      Unary("top_k", Op("top_k", {"b"}, {{"k", I(3)}, {"new_dim", S("kk")}}),
            {{"a", 3}, {"b", 6}}, Distinct()),
      Unary("sort_descending", Op("sort", {"b"}, {{"descending", B(true)}}), {{"a", 3}, {"b", 5}},
            Distinct()),
      Unary("sort", Op("sort", {"a"}), {{"a", 5}, {"b", 2}}, Distinct()),
      Unary("cumsum", Op("cumsum", {"b"}), kAB),
      Binary("cumsum_exclusive_carry", Op("cumsum", {"b"}, {{"exclusive", B(true)}}), kAB,
             {{"a", 4}}),
  });
}

// ---- spatial -----------------------------------------------------------------------------------

Case Conv(const std::string& name, const std::string& type, const Dims& x, const Dims& f,
          const std::vector<std::string>& dims, const std::string& padding,
          const std::vector<int64_t>& strides) {
  return Binary(name, Op(type, dims, {{"padding", S(padding)}, {"strides", Ints(strides)}}), x,
                f);
}

Case Conv2d() {
  return Conv("conv2d", "conv2d", {{"n", 2}, {"h", 4}, {"w", 4}, {"c", 2}},
              {{"kh", 3}, {"kw", 2}, {"c", 2}, {"o", 2}}, {"h", "w"}, "SAME", {1, 1});
}

Case MaxPool() {
  // w: 5 positions, windows of 2: the last position is in no window.
  return Unary("max_pool", Op("max_pool", {"h", "w"}, {{"ksize", Ints({2, 2})}}),
               {{"n", 2}, {"h", 4}, {"w", 5}, {"c", 2}}, Distinct());
}

TEST(AutodiffFamiliesTest, Spatial) {
  CheckAll({
      Unary("shift", Op("shift", {"b"}, {{"offset", I(2)}}), {{"a", 3}, {"b", 6}}),
      Unary("shift_wrap", Op("shift", {"b"}, {{"offset", I(-1)}, {"wrap", B(true)}}),
            {{"a", 3}, {"b", 6}}),
      Unary("halo_exchange", Op("halo_exchange", {"nb", "blk"}, {{"halo", I(1)}}),
            {{"nb", 3}, {"blk", 4}, {"c", 2}}),
      Unary("halo_exchange_wrap",
            Op("halo_exchange", {"nb", "blk"}, {{"halo", I(2)}, {"wrap", B(true)}}),
            {{"c", 2}, {"nb", 3}, {"blk", 3}}),
      Conv("conv1d_same", "conv1d", {{"n", 2}, {"w", 7}, {"c", 2}}, {{"k", 3}, {"c", 2}, {"o", 3}},
           {"w"}, "SAME", {1}),
      Conv("conv1d_valid_stride2", "conv1d", {{"w", 8}, {"c", 2}}, {{"k", 3}, {"c", 2}, {"o", 2}},
           {"w"}, "VALID", {2}),
      Conv("conv1d_same_stride2", "conv1d", {{"w", 7}, {"c", 2}}, {{"k", 3}, {"c", 2}, {"o", 2}},
           {"w"}, "SAME", {2}),
      Conv2d(),
      Conv("conv2d_stride", "conv2d", {{"h", 5}, {"c", 2}, {"w", 4}},
           {{"kh", 2}, {"kw", 3}, {"c", 2}, {"o", 2}}, {"h", "w"}, "SAME", {2, 1}),
      MaxPool(),
      Unary("avg_pool", Op("avg_pool", {"h", "w"}, {{"ksize", Ints({2, 3})}}),
            {{"n", 2}, {"h", 4}, {"w", 7}, {"c", 2}}),
  });
}

// ---- layouts -----------------------------------------------------------------------------------

// Gradients whose ops reduce or move data along split dims: allreduces over a split normalised
// dim, a one_hot over a split vocabulary, shifts and slices of a split spatial dim, windows of a
// split pooled dim, slice/pad/concat along split dims.
TEST(AutodiffFamiliesTest, GradientsLowerOnSplitDims) {
  ExpectLayoutInvariant(LayerNorm(), {{"p:2", "b:p"}, {"r:2,s:2", "a:r,b:s"}});
  ExpectLayoutInvariant(RmsNorm(), {{"p:2", "b:p"}, {"r:2,s:2", "a:r,b:s"}, {"p:2", "a:p"}});
  ExpectLayoutInvariant(LayerNormOuterDim(),
                        {{"p:2", "b:p"}, {"p:2", "a:p"}, {"r:2,s:2", "a:r,b:s"}});
  ExpectLayoutInvariant(LayerNormScaleOverKeptDim(), {{"p:2", "b:p"}, {"r:2,s:2", "a:r,b:s"}});
  ExpectLayoutInvariant(Gather(), {{"p:2", "v:p"}, {"r:2,s:2", "n:r,d:s"}, {"p:4", "n:p"}});
  ExpectLayoutInvariant(Conv2d(),
                        {{"p:2", "h:p"}, {"r:2,s:2", "n:r,w:s"}, {"r:2,s:2", "h:r,c:s"}});
  ExpectLayoutInvariant(MaxPool(), {{"p:2", "h:p"}, {"r:2,s:2", "n:r,c:s"}});
  ExpectLayoutInvariant(SliceConcat(), {{"p:2", "b:p"}, {"r:2,s:2", "a:r,bc:s"}});
}

// Every op the registry marks differentiable has a rule.
TEST(AutodiffFamiliesTest, EveryDifferentiableOpHasARule) {
  for (const OpInfo& op : AllOps()) {
    if (op.differentiable) {
      EXPECT_TRUE(HasGradient(op.type)) << op.type;
    }
  }
}

// The gradient facet and `differentiable` agree both ways: differentiable ops have a rule, ops with
// a rule are differentiable, zero-gradient ops have no rule and are not differentiable; every
// registered facet found its op.
TEST(AutodiffFamiliesTest, GradientFacetsAgreeWithDifferentiable) {
  EXPECT_TRUE(CheckGradientFacets().ok()) << CheckGradientFacets();
  int rules = 0, zeros = 0;
  for (const OpInfo& op : AllOps()) {
    EXPECT_EQ(op.differentiable, op.gradient != nullptr) << op.type;
    EXPECT_EQ(HasGradient(op.type), op.gradient != nullptr) << op.type;
    if (op.zero_gradient) {
      EXPECT_EQ(op.gradient, nullptr) << op.type;
      EXPECT_FALSE(op.differentiable) << op.type;
    }
    rules += op.gradient != nullptr;
    zeros += op.zero_gradient;
  }
  // The families' rules (core/ops/gradients_*.cc: 53), the single-op files' own (core/ops/op_*.cc,
  // each checked against finite differences by its own test), and the piecewise-constant ops.
  EXPECT_GE(rules, 53);
  EXPECT_EQ(zeros, 11);
  EXPECT_NE(FindOp("add")->gradient, nullptr);
  EXPECT_NE(FindOp("conv2d")->gradient, nullptr);
  EXPECT_TRUE(FindOp("less")->zero_gradient);
  EXPECT_TRUE(FindOp("argmax")->zero_gradient);
  // Neither: while_loop stops autodiff (Unimplemented); sources and state are never on the path.
  for (const char* type : {"while_loop", "placeholder", "variable", "layer_norm_grad"}) {
    ASSERT_NE(FindOp(type), nullptr) << type;
    EXPECT_EQ(FindOp(type)->gradient, nullptr) << type;
    EXPECT_FALSE(FindOp(type)->zero_gradient) << type;
  }
}

}  // namespace
}  // namespace meshrt
