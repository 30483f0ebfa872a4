// Optimizers (core/train/optimizers.h): every optimizer, schedule and clipping mode against a
// hand-written reference of the same formulas on plain std::vector<float>; microbatch accumulation
// against full batches; every optimizer lowered and run on the simulated mesh under several layouts
// against the interpreter; bad options refused naming the field.
//
// The model: pred[batch, d_out] = x·w + bias + x3·u, loss = mean over batch and d_out of
// (pred - y)^2, with w [d_in, d_out] and u [h, d_in, d_out] (Adafactor factors them: u keeps its
// leading h dim in vr and vc) and bias [d_out] (unfactored). Its gradients are written out by hand
// in the reference.
#include "core/train/optimizers.h"

#include <cmath>
#include <functional>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

constexpr int kIn = 4, kOut = 6, kH = 2, kBatch = 8;
const char* const kVars[] = {"w", "bias", "u"};

Shape WShape() { return Shape({{"d_in", kIn}, {"d_out", kOut}}); }
Shape BiasShape() { return Shape({{"d_out", kOut}}); }
Shape UShape() { return Shape({{"h", kH}, {"d_in", kIn}, {"d_out", kOut}}); }

// ---- data ---------------------------------------------------------------------------------------

// Rows [first, first + rows) of step s's full batch, so quarter batches are slices of full ones.
TensorMap Feeds(int s, int first, int rows) {
  Tensor x(DType::kFloat32, Shape({{"batch", rows}, {"d_in", kIn}}));
  Tensor x3(DType::kFloat32, Shape({{"batch", rows}, {"h", kH}, {"d_in", kIn}}));
  Tensor y(DType::kFloat32, Shape({{"batch", rows}, {"d_out", kOut}}));
  for (int r = 0; r < rows; ++r) {
    const int row = first + r;
    for (int i = 0; i < kIn; ++i) x.f32()[r * kIn + i] = std::sin(0.37f * (i + 4 * row) + 1.3f * s);
    for (int j = 0; j < kH * kIn; ++j) {
      x3.f32()[r * kH * kIn + j] = 0.7f * std::cos(0.29f * (j + 8 * row) + 0.6f * s);
    }
    for (int o = 0; o < kOut; ++o) {
      y.f32()[r * kOut + o] = 2.0f * std::cos(0.23f * (o + 6 * row) + 0.9f * s) + 0.5f;
    }
  }
  return {{"x", x}, {"x3", x3}, {"y", y}};
}

TensorMap InitialParams() {
  Tensor w(DType::kFloat32, WShape()), bias(DType::kFloat32, BiasShape()),
      u(DType::kFloat32, UShape());
  for (int i = 0; i < w.num_elements(); ++i) w.f32()[i] = 0.4f * std::sin(1.1f * i + 0.2f);
  for (int i = 0; i < bias.num_elements(); ++i) bias.f32()[i] = 0.1f * i - 0.2f;
  for (int i = 0; i < u.num_elements(); ++i) u.f32()[i] = 0.3f * std::cos(0.7f * i + 0.5f);
  return {{"w", w}, {"bias", bias}, {"u", u}};
}

// ---- the graph ----------------------------------------------------------------------------------

absl::StatusOr<Graph> BuildTrainGraph(int batch, const TrainOptions& options) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", batch}, {"d_in", kIn}}));
  TensorRef x3 = b.Placeholder("x3", Shape({{"batch", batch}, {"h", kH}, {"d_in", kIn}}));
  TensorRef y = b.Placeholder("y", Shape({{"batch", batch}, {"d_out", kOut}}));
  Initializer glorot;
  glorot.kind = "glorot_uniform";
  glorot.seed = 5;
  Initializer small;
  small.kind = "constant";
  small.value = 0.1f;
  TensorRef w = b.Variable("w", WShape(), glorot);
  TensorRef bias = b.Variable("bias", BiasShape(), small);
  TensorRef u = b.Variable("u", UShape(), glorot);
  const Shape out({{"batch", batch}, {"d_out", kOut}});
  TensorRef pred = b.Add(b.Add(b.Einsum({x, w}, out), bias), b.Einsum({x3, u}, out));
  TensorRef err = b.Sub(pred, y);
  TensorRef loss = b.ReduceMean(b.Mul(err, err), {}, "loss");
  absl::StatusOr<TrainOps> train = Minimize(b, loss, {w, bias, u}, options);
  if (!train.ok()) return train.status();
  if (train->learning_rate.name != "train/learning_rate" ||
      train->global_norm.name != "train/global_norm" || train->global_step.name != "global_step" ||
      train->gradients.size() != 3) {
    return absl::InternalError("unexpected TrainOps");
  }
  return b.Build();
}

// ---- the reference ------------------------------------------------------------------------------

struct RefVar {
  std::string name;
  std::vector<int> shape;
  std::vector<float> w, m, v, vr, vc;
};

// Gradients of the loss on one batch (rows of Feeds), by hand.
std::vector<std::vector<float>> RefGradients(const std::vector<RefVar>& vars, const TensorMap& f) {
  const Tensor& x = f.at("x");
  const Tensor& x3 = f.at("x3");
  const Tensor& y = f.at("y");
  const int rows = static_cast<int>(x.shape().dim(0).size);
  const std::vector<float>&w = vars[0].w, &bias = vars[1].w, &u = vars[2].w;
  std::vector<float> err(rows * kOut);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < kOut; ++o) {
      float p = bias[o];
      for (int i = 0; i < kIn; ++i) p += x.f32()[r * kIn + i] * w[i * kOut + o];
      for (int h = 0; h < kH; ++h) {
        for (int i = 0; i < kIn; ++i) {
          p += x3.f32()[(r * kH + h) * kIn + i] * u[(h * kIn + i) * kOut + o];
        }
      }
      err[r * kOut + o] = p - y.f32()[r * kOut + o];
    }
  }
  const float c = 2.0f / (rows * kOut);
  std::vector<std::vector<float>> g = {std::vector<float>(kIn * kOut, 0.0f),
                                       std::vector<float>(kOut, 0.0f),
                                       std::vector<float>(kH * kIn * kOut, 0.0f)};
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < kOut; ++o) {
      const float e = c * err[r * kOut + o];
      g[1][o] += e;
      for (int i = 0; i < kIn; ++i) g[0][i * kOut + o] += x.f32()[r * kIn + i] * e;
      for (int h = 0; h < kH; ++h) {
        for (int i = 0; i < kIn; ++i) {
          g[2][(h * kIn + i) * kOut + o] += x3.f32()[(r * kH + h) * kIn + i] * e;
        }
      }
    }
  }
  return g;
}

class Reference {
 public:
  Reference(const TrainOptions& o, const TensorMap& init) : o_(o) {
    for (const char* name : kVars) {
      RefVar v;
      v.name = name;
      const Tensor& t = init.at(name);
      for (const Dim& d : t.shape().dims()) v.shape.push_back(static_cast<int>(d.size));
      v.w.assign(t.floats().begin(), t.floats().end());
      v.m.assign(v.w.size(), 0.0f);
      v.v.assign(v.w.size(), 0.0f);
      if (v.shape.size() >= 2) {
        const int cols = v.shape.back(), rows = v.shape[v.shape.size() - 2];
        v.vr.assign(v.w.size() / cols, 0.0f);
        v.vc.assign(v.w.size() / rows, 0.0f);
      }
      vars_.push_back(std::move(v));
    }
  }

  float Lr(int t) const {
    const LearningRate& s = o_.learning_rate;
    if (s.kind == "constant") return s.base;
    const float w = std::max<float>(1.0f, s.warmup_steps);
    const float warm = std::min(1.0f, t / w);
    if (s.kind == "linear_warmup") return s.base * warm;
    return s.base * warm / std::sqrt(std::max<float>(t, w) / w);
  }

  // One update with gradients `g` (one per variable).
  void Step(std::vector<std::vector<float>> g) {
    ++t_;
    double total = 0;
    for (const auto& gi : g) {
      for (float x : gi) total += double(x) * x;
    }
    norm_ = static_cast<float>(std::sqrt(total));
    if (o_.clip_global_norm > 0) {
      const float f = o_.clip_global_norm / std::max(norm_, o_.clip_global_norm);
      if (norm_ > o_.clip_global_norm) ++global_clips_;
      for (auto& gi : g) {
        for (float& x : gi) x *= f;
      }
    }
    lr_ = Lr(t_);
    for (size_t k = 0; k < vars_.size(); ++k) Update(&vars_[k], g[k]);
  }

  void Update(RefVar* var, const std::vector<float>& g) {
    const size_t n = g.size();
    std::vector<float> step(n);
    const std::string& opt = o_.optimizer;
    if (opt == "sgd") {
      step = g;
    } else if (opt == "momentum") {
      for (size_t i = 0; i < n; ++i) step[i] = var->m[i] = o_.momentum * var->m[i] + g[i];
    } else if (opt == "adam" || opt == "adamw") {
      const float bc1 = 1.0f - std::pow(o_.beta1, float(t_));
      const float bc2 = 1.0f - std::pow(o_.beta2, float(t_));
      for (size_t i = 0; i < n; ++i) {
        var->m[i] = o_.beta1 * var->m[i] + (1.0f - o_.beta1) * g[i];
        var->v[i] = o_.beta2 * var->v[i] + (1.0f - o_.beta2) * g[i] * g[i];
        const float m_hat = var->m[i] / bc1, v_hat = var->v[i] / bc2;
        step[i] = m_hat / (std::sqrt(v_hat) + o_.epsilon);
        if (opt == "adamw") step[i] += o_.weight_decay * var->w[i];
      }
    } else {  // adafactor
      const float beta2 = 1.0f - std::pow(float(t_), -o_.adafactor_decay);
      std::vector<float> g2(n);
      for (size_t i = 0; i < n; ++i) g2[i] = g[i] * g[i] + o_.adafactor_epsilon;
      if (var->shape.size() >= 2) {
        const int cols = var->shape.back(), rows = var->shape[var->shape.size() - 2];
        const int lead = static_cast<int>(n) / (rows * cols);
        for (int l = 0; l < lead; ++l) {
          for (int r = 0; r < rows; ++r) {
            float s = 0;
            for (int c = 0; c < cols; ++c) s += g2[(l * rows + r) * cols + c];
            float& vr = var->vr[l * rows + r];
            vr = beta2 * vr + (1 - beta2) * (s / cols);
          }
          for (int c = 0; c < cols; ++c) {
            float s = 0;
            for (int r = 0; r < rows; ++r) s += g2[(l * rows + r) * cols + c];
            float& vc = var->vc[l * cols + c];
            vc = beta2 * vc + (1 - beta2) * (s / rows);
          }
          float mean_vr = 0;
          for (int r = 0; r < rows; ++r) mean_vr += var->vr[l * rows + r];
          mean_vr /= rows;
          for (int r = 0; r < rows; ++r) {
            for (int c = 0; c < cols; ++c) {
              const int i = (l * rows + r) * cols + c;
              const float v_hat = var->vr[l * rows + r] * var->vc[l * cols + c] / mean_vr;
              step[i] = g[i] / std::sqrt(v_hat);
            }
          }
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          var->v[i] = beta2 * var->v[i] + (1 - beta2) * g2[i];
          step[i] = g[i] / std::sqrt(var->v[i]);
        }
      }
      if (o_.adafactor_clip > 0) {
        double s = 0;
        for (float x : step) s += double(x) * x;
        const float rms = static_cast<float>(std::sqrt(s / n));
        const float d = std::max(1.0f, rms / o_.adafactor_clip);
        if (d > 1.0f) ++update_clips_;
        for (float& x : step) x /= d;
      }
    }
    for (size_t i = 0; i < n; ++i) var->w[i] -= lr_ * step[i];
  }

  const std::vector<RefVar>& vars() const { return vars_; }
  float lr() const { return lr_; }
  float norm() const { return norm_; }
  int global_clips() const { return global_clips_; }
  int update_clips() const { return update_clips_; }

 private:
  TrainOptions o_;
  std::vector<RefVar> vars_;
  int t_ = 0;
  float lr_ = 0, norm_ = 0;
  int global_clips_ = 0, update_clips_ = 0;
};

// Largest |got - want| / max(1, |want|).
double MaxError(const Tensor& got, const std::vector<float>& want) {
  if (got.num_elements() != static_cast<int64_t>(want.size())) return 1e30;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got.f32()[i]) - want[i]) / std::max(1.0, std::fabs(double(want[i])));
    if (std::isnan(got.f32()[i])) return 1e30;
    worst = std::max(worst, d);
  }
  return worst;
}

// Runs `steps` full-batch steps of `o` in the interpreter and in the reference, comparing weights,
// learning rate and global norm after every step. Returns the reference for further checks.
std::unique_ptr<Reference> CheckAgainstReference(const TrainOptions& o, int steps) {
  auto graph = BuildTrainGraph(kBatch, o);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return nullptr;
  TensorMap state = InitialParams();
  auto ref = std::make_unique<Reference>(o, state);
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE(absl::StrCat("step ", s));
    const TensorMap feeds = Feeds(s, 0, kBatch);
    auto out = InterpretStep(*graph, feeds, {"train/learning_rate", "train/global_norm"}, &state);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return nullptr;
    ref->Step(RefGradients(ref->vars(), feeds));
    EXPECT_NEAR(out->at("train/learning_rate").f32()[0], ref->lr(), 1e-6 * ref->lr());
    EXPECT_NEAR(out->at("train/global_norm").f32()[0], ref->norm(), 1e-5 * ref->norm());
    for (const RefVar& v : ref->vars()) {
      EXPECT_LT(MaxError(state.at(v.name), v.w), 1e-5) << v.name;
    }
    EXPECT_EQ(state.at("global_step").f32()[0], s + 1);
  }
  // The weights moved far more than the tolerance (so a wrong formula shows).
  for (const RefVar& v : ref->vars()) {
    EXPECT_GT(MaxError(InitialParams().at(v.name), v.w), 1e-3) << v.name;
  }
  return ref;
}

TrainOptions Options(const std::string& optimizer, float lr) {
  TrainOptions o;
  o.optimizer = optimizer;
  o.learning_rate.base = lr;
  return o;
}

TEST(OptimizersTest, SgdMatchesReference) { CheckAgainstReference(Options("sgd", 0.1f), 4); }

// The registry's records: every optimizer by name, which of them are adaptive, and an unknown
// name refused listing the registered ones.
TEST(OptimizersTest, OptimizersAreRegisteredByName) {
  for (const char* name : {"adam", "adamw", "adafactor"}) EXPECT_TRUE(IsAdaptiveOptimizer(name));
  for (const char* name : {"sgd", "momentum", "lion"}) EXPECT_FALSE(IsAdaptiveOptimizer(name));
  GraphBuilder b;
  TensorRef w = b.Variable("w", WShape());
  TensorRef loss = b.ReduceSum(w, {}, "loss");
  EXPECT_TRUE(StatusIs(Minimize(b, loss, {w}, Options("lion", 0.1f)).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"unknown optimizer 'lion' (sgd, momentum, adam, adamw, adafactor)"}));
}

// Every op Minimize adds is named where it belongs: the backward pass after the op it
// differentiates ("<op>/grad/..."), each variable's optimizer math and norm terms after the
// variable ("w/adam/...", "w/grad_norm/..."), the shared scalars and the assignments under
// "train/" ("train/t", "train/learning_rate", "train/update/w") — none is a bare "mul_3".
TEST(OptimizersTest, EveryOpIsNamedByWhatItServes) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", kBatch}, {"d_in", kIn}}));
  TensorRef w = b.Variable("w", WShape());
  TensorRef loss =
      b.ReduceMean(b.Einsum({x, w}, Shape({{"batch", kBatch}, {"d_out", kOut}}), "y"), {}, "loss");
  TrainOptions o = Options("adam", 0.1f);
  o.clip_global_norm = 1.0f;
  o.microbatches = 2;
  const int before = b.proto().ops_size();
  ASSERT_OK(Minimize(b, loss, {w}, o).status());
  std::set<std::string> names;
  for (int i = before; i < b.proto().ops_size(); ++i) {
    const v1::Op& op = b.proto().ops(i);
    if (op.type() == "variable") continue;  // named as given: w/m, w/v, w/acc, global_step
    names.insert(op.name());
    EXPECT_TRUE(absl::StartsWith(op.name(), "train/") || absl::StartsWith(op.name(), "w/") ||
                absl::StartsWith(op.name(), "y/grad/") || absl::StartsWith(op.name(), "loss/grad/"))
        << op.name() << " (" << op.type() << ")";
  }
  for (const char* want : {"train/t", "train/learning_rate", "train/update/w", "train/update/w/m",
                           "train/update/w/acc", "train/global_norm", "train/clip_factor"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  auto any_under = [&](const std::string& prefix) {
    for (const std::string& n : names) {
      if (absl::StartsWith(n, prefix)) return true;
    }
    return false;
  };
  EXPECT_TRUE(any_under("w/adam/"));
  EXPECT_TRUE(any_under("w/accumulate/"));
  EXPECT_TRUE(any_under("w/grad_norm/"));
  EXPECT_TRUE(any_under("w/clip/"));
  EXPECT_TRUE(any_under("y/grad/"));
}

// Minimize's `also`: the input gradient comes out of the same backward pass, equal to the
// hand-written one, and changes neither the update nor the global norm.
TEST(OptimizersTest, AlsoReturnsOtherGradientsWithoutApplyingThem) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", kBatch}, {"d_in", kIn}}));
  TensorRef y = b.Placeholder("y", Shape({{"batch", kBatch}, {"d_out", kOut}}));
  TensorRef w = b.Variable("w", WShape());
  const Shape out({{"batch", kBatch}, {"d_out", kOut}});
  TensorRef err = b.Sub(b.Einsum({x, w}, out), y);
  TensorRef loss = b.ReduceMean(b.Mul(err, err), {}, "loss");
  ASSERT_OK_AND_ASSIGN(TrainOps train, Minimize(b, loss, {w}, Options("sgd", 0.1f), {x}));
  ASSERT_EQ(train.other_gradients.size(), 1u);
  b.MarkOutput(train.other_gradients[0]);
  ASSERT_OK_AND_ASSIGN(Graph graph, b.Build());

  TensorMap feeds = Feeds(0, 0, kBatch);
  feeds.erase("x3");
  TensorMap state = {{"w", InitialParams().at("w")}};
  const std::vector<float> w0(state.at("w").floats().begin(), state.at("w").floats().end());
  ASSERT_OK_AND_ASSIGN(TensorMap got,
                       InterpretStep(graph, feeds, {train.other_gradients[0].name,
                                                     "train/global_norm"}, &state));
  const Tensor& gx = got.at(train.other_gradients[0].name);
  ASSERT_EQ(gx.shape(), feeds.at("x").shape());
  const float c = 2.0f / (kBatch * kOut);
  double norm2 = 0;
  std::vector<float> gw(kIn * kOut, 0.0f);
  for (int r = 0; r < kBatch; ++r) {
    std::vector<float> e(kOut);
    for (int o = 0; o < kOut; ++o) {
      float p = 0;
      for (int i = 0; i < kIn; ++i) p += feeds.at("x").f32()[r * kIn + i] * w0[i * kOut + o];
      e[o] = c * (p - feeds.at("y").f32()[r * kOut + o]);
      for (int i = 0; i < kIn; ++i) gw[i * kOut + o] += feeds.at("x").f32()[r * kIn + i] * e[o];
    }
    for (int i = 0; i < kIn; ++i) {
      float want = 0;
      for (int o = 0; o < kOut; ++o) want += e[o] * w0[i * kOut + o];
      EXPECT_NEAR(gx.f32()[r * kIn + i], want, 1e-5 + 1e-4 * std::abs(want)) << r << "," << i;
    }
  }
  for (int k = 0; k < kIn * kOut; ++k) {
    norm2 += gw[k] * gw[k];
    EXPECT_NEAR(state.at("w").f32()[k], w0[k] - 0.1f * gw[k], 1e-5) << k;
  }
  EXPECT_NEAR(got.at("train/global_norm").f32()[0], std::sqrt(norm2), 1e-5 * std::sqrt(norm2));
  EXPECT_TRUE(StatusIs(Minimize(b, loss, {w}, Options("sgd", 0.1f), {TensorRef{"nope", {}}}).status(),
                       absl::StatusCode::kInvalidArgument, {"also[0] 'nope'"}));
}

TEST(OptimizersTest, MomentumMatchesReference) {
  TrainOptions o = Options("momentum", 0.05f);
  o.momentum = 0.8f;
  CheckAgainstReference(o, 4);
}

TEST(OptimizersTest, AdamMatchesReference) {
  TrainOptions o = Options("adam", 0.02f);
  o.beta1 = 0.8f;
  o.beta2 = 0.95f;
  o.epsilon = 1e-6f;
  CheckAgainstReference(o, 4);
  // With a schedule: t enters both the bias correction and the learning rate.
  o.learning_rate.kind = "rsqrt_decay";
  o.learning_rate.warmup_steps = 2;
  CheckAgainstReference(o, 4);
}

TEST(OptimizersTest, AdamWDecaysWeightsDecoupled) {
  TrainOptions o = Options("adamw", 0.01f);
  o.weight_decay = 0.5f;
  CheckAgainstReference(o, 4);
  // Decay only differs from adam by lr * wd * w per step.
  TrainOptions plain = Options("adamw", 0.01f);
  auto decayed = CheckAgainstReference(o, 1);
  auto undecayed = CheckAgainstReference(plain, 1);
  ASSERT_TRUE(decayed && undecayed);
  const TensorMap init = InitialParams();
  for (size_t k = 0; k < 3; ++k) {
    const std::vector<float>& a = decayed->vars()[k].w;
    const std::vector<float>& b = undecayed->vars()[k].w;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(b[i] - a[i], 0.01f * 0.5f * init.at(kVars[k]).f32()[i], 1e-6);
    }
  }
}

TEST(OptimizersTest, AdafactorFactoredAndUnfactoredMatchReference) {
  // Default clip (1.0), clipping forced on, and clipping off.
  TrainOptions o = Options("adafactor", 0.05f);
  CheckAgainstReference(o, 4);
  o.adafactor_clip = 0.5f;
  auto clipped = CheckAgainstReference(o, 4);
  ASSERT_TRUE(clipped);
  EXPECT_GT(clipped->update_clips(), 0);
  o.adafactor_clip = 0.0f;
  o.adafactor_decay = 0.5f;
  o.adafactor_epsilon = 1e-3f;
  o.learning_rate.kind = "linear_warmup";
  o.learning_rate.warmup_steps = 3;
  auto unclipped = CheckAgainstReference(o, 4);
  ASSERT_TRUE(unclipped);
  EXPECT_EQ(unclipped->update_clips(), 0);

  // The slots: factored vr [d_in] and vc [d_out] for w; vr [h, d_in] and vc [h, d_out] for u
  // (leading dims kept); unfactored v for bias.
  auto graph = BuildTrainGraph(kBatch, Options("adafactor", 0.05f));
  ASSERT_TRUE(graph.ok()) << graph.status();
  TensorMap state;
  ASSERT_OK(InterpretStep(*graph, Feeds(0, 0, kBatch), {"loss"}, &state).status());
  EXPECT_EQ(state.at("w/vr").shape(), Shape({{"d_in", kIn}}));
  EXPECT_EQ(state.at("w/vc").shape(), Shape({{"d_out", kOut}}));
  EXPECT_EQ(state.at("u/vr").shape(), Shape({{"h", kH}, {"d_in", kIn}}));
  EXPECT_EQ(state.at("u/vc").shape(), Shape({{"h", kH}, {"d_out", kOut}}));
  EXPECT_EQ(state.at("bias/v").shape(), BiasShape());
  EXPECT_FALSE(state.count("w/v") || state.count("w/m") || state.count("bias/vr"));
}

TEST(OptimizersTest, LearningRateSchedules) {
  struct Case {
    std::string kind;
    int64_t warmup;
    std::vector<float> want;  // lr at t = 1..6, base 0.1
  };
  const std::vector<Case> cases = {
      {"constant", 0, {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f}},
      {"linear_warmup", 3, {0.1f / 3, 0.2f / 3, 0.1f, 0.1f, 0.1f, 0.1f}},
      {"linear_warmup", 0, {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f}},
      {"rsqrt_decay", 3,
       {0.1f / 3, 0.2f / 3, 0.1f, 0.1f * std::sqrt(3.0f / 4), 0.1f * std::sqrt(3.0f / 5),
        0.1f * std::sqrt(3.0f / 6)}},
      {"rsqrt_decay", 0,
       {0.1f, 0.1f / std::sqrt(2.0f), 0.1f / std::sqrt(3.0f), 0.05f, 0.1f / std::sqrt(5.0f),
        0.1f / std::sqrt(6.0f)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.kind + " warmup " + std::to_string(c.warmup));
    TrainOptions o = Options("sgd", 0.1f);
    o.learning_rate.kind = c.kind;
    o.learning_rate.warmup_steps = c.warmup;
    CheckAgainstReference(o, 2);  // weights follow the scheduled rate
    ASSERT_OK_AND_ASSIGN(Graph g, BuildTrainGraph(kBatch, o));
    TensorMap state;
    for (int s = 0; s < 6; ++s) {
      ASSERT_OK_AND_ASSIGN(TensorMap out,
                           InterpretStep(g, Feeds(s, 0, kBatch), {"train/learning_rate"}, &state));
      EXPECT_NEAR(out.at("train/learning_rate").f32()[0], c.want[s], 1e-7) << "t = " << s + 1;
    }
  }
}

TEST(OptimizersTest, GlobalNormClipping) {
  // The gradients' global norm here is about 3-5: a threshold of 0.5 clips every step, 100 none.
  TrainOptions o = Options("sgd", 0.1f);
  o.clip_global_norm = 0.5f;
  auto active = CheckAgainstReference(o, 4);
  ASSERT_TRUE(active);
  EXPECT_EQ(active->global_clips(), 4);
  o.clip_global_norm = 100.0f;
  auto inactive = CheckAgainstReference(o, 4);
  ASSERT_TRUE(inactive);
  EXPECT_EQ(inactive->global_clips(), 0);
  // With momentum too (the clipped gradient feeds the slot).
  o = Options("momentum", 0.05f);
  o.clip_global_norm = 1.0f;
  EXPECT_GT(CheckAgainstReference(o, 3)->global_clips(), 0);
}

// K steps on 1/K of the batch apply once, the same update as one step on the whole batch; the other
// steps change no weight or slot.
void CheckMicrobatches(TrainOptions o) {
  constexpr int kK = 4, kRows = kBatch / kK, kFullSteps = 2;
  ASSERT_OK_AND_ASSIGN(Graph full, BuildTrainGraph(kBatch, o));
  o.microbatches = kK;
  ASSERT_OK_AND_ASSIGN(Graph micro, BuildTrainGraph(kRows, o));
  TensorMap full_state = InitialParams(), micro_state = InitialParams();
  for (int s = 0; s < kFullSteps; ++s) {
    SCOPED_TRACE(absl::StrCat("full step ", s));
    ASSERT_OK_AND_ASSIGN(TensorMap want,
                         InterpretStep(full, Feeds(s, 0, kBatch), {"train/learning_rate"},
                                       &full_state));
    for (int q = 0; q < kK; ++q) {
      SCOPED_TRACE(absl::StrCat("microbatch ", q));
      const TensorMap before = micro_state;
      ASSERT_OK_AND_ASSIGN(TensorMap got,
                           InterpretStep(micro, Feeds(s, q * kRows, kRows),
                                         {"train/learning_rate", "train/apply", "train/t"},
                                         &micro_state));
      EXPECT_EQ(got.at("train/apply").f32()[0], q == kK - 1 ? 1 : 0);
      EXPECT_EQ(got.at("train/t").f32()[0], s + 1);
      EXPECT_EQ(micro_state.at("micro_step").f32()[0], (q + 1) % kK);
      EXPECT_EQ(micro_state.at("global_step").f32()[0], s * kK + q + 1);
      if (q < kK - 1) {
        // Weights and slots (not the accumulators and counters) keep their values; the slots
        // are still zero until the first update.
        for (const auto& [name, value] : micro_state) {
          if (name == "global_step" || name == "micro_step" || absl::EndsWith(name, "/acc")) {
            continue;
          }
          if (before.count(name)) {
            EXPECT_EQ(MaxRelativeError(value, before.at(name)), 0) << name;
          } else {
            EXPECT_EQ(MaxRelativeError(value, Tensor(DType::kFloat32, value.shape())), 0) << name;
          }
        }
        const Tensor& acc_before = before.count("w/acc") ? before.at("w/acc")
                                                         : Tensor(DType::kFloat32, WShape());
        EXPECT_GT(MaxRelativeError(micro_state.at("w/acc"), acc_before), 1e-3);
      } else {
        EXPECT_NEAR(got.at("train/learning_rate").f32()[0],
                    want.at("train/learning_rate").f32()[0], 1e-8);
        for (const char* v : kVars) {
          EXPECT_LT(MaxRelativeError(micro_state.at(v), full_state.at(v)), 1e-5) << v;
          EXPECT_GT(MaxRelativeError(micro_state.at(v), before.at(v)), 1e-3) << v;
          EXPECT_EQ(MaxRelativeError(micro_state.at(std::string(v) + "/acc"),
                                     Tensor(DType::kFloat32, full_state.at(v).shape())),
                    0);
        }
      }
    }
    for (const auto& [name, value] : full_state) {
      if (name == "global_step") continue;
      EXPECT_LT(MaxRelativeError(micro_state.at(name), value), 1e-5) << name;
    }
  }
  EXPECT_EQ(full_state.at("global_step").f32()[0], kFullSteps);
  EXPECT_EQ(micro_state.at("global_step").f32()[0], kFullSteps * kK);
}

TEST(OptimizersTest, MicrobatchesMatchFullBatchSgd) { CheckMicrobatches(Options("sgd", 0.1f)); }

TEST(OptimizersTest, MicrobatchesMatchFullBatchAdam) {
  TrainOptions o = Options("adam", 0.02f);
  o.learning_rate.kind = "linear_warmup";
  o.learning_rate.warmup_steps = 2;  // t must count updates, not steps
  CheckMicrobatches(o);
}

TEST(OptimizersTest, MicrobatchesWithClippingAndAdafactor) {
  TrainOptions o = Options("adafactor", 0.05f);
  o.clip_global_norm = 0.5f;
  CheckMicrobatches(o);
}

// Every optimizer's updates, lowered, equal the interpreter's on several layouts.
TEST(OptimizersTest, UpdatesAreLayoutInvariant) {
  std::vector<std::pair<std::string, TrainOptions>> configs;
  configs.push_back({"sgd", Options("sgd", 0.1f)});
  TrainOptions o = Options("momentum", 0.05f);
  o.clip_global_norm = 1.0f;
  configs.push_back({"momentum+clip", o});
  o = Options("adam", 0.02f);
  o.learning_rate.kind = "rsqrt_decay";
  o.learning_rate.warmup_steps = 2;
  configs.push_back({"adam", o});
  o = Options("adamw", 0.02f);
  o.weight_decay = 0.1f;
  configs.push_back({"adamw", o});
  o = Options("adafactor", 0.05f);
  o.adafactor_clip = 0.5f;
  configs.push_back({"adafactor", o});
  o = Options("adam", 0.02f);
  o.microbatches = 2;
  o.clip_global_norm = 0.5f;
  configs.push_back({"adam+microbatches", o});

  const std::vector<std::pair<std::string, std::string>> layouts = {
      {"x:2", "batch:x"},                 // data parallel
      {"x:2", "d_out:x"},                 // model parallel: the weights' last dim
      {"x:2", "d_in:x"},                  // the second-to-last dim
      {"x:2", "h:x"},                     // u's leading dim (kept by its vr and vc)
      {"r:2,c:2", "batch:r,d_out:c"},     // both
      {"r:2,c:2", "d_in:r,d_out:c"}};     // both factored dims of w and u split
  constexpr int kSteps = 4;
  for (const auto& [label, options] : configs) {
    SCOPED_TRACE(label);
    ASSERT_OK_AND_ASSIGN(Graph g, BuildTrainGraph(kBatch, options));
    std::vector<TensorMap> want;
    TensorMap state;
    for (int s = 0; s < kSteps; ++s) {
      ASSERT_OK_AND_ASSIGN(TensorMap out,
                           InterpretStep(g, Feeds(s, 0, kBatch),
                                         {"loss", "train/learning_rate", "train/global_norm"},
                                         &state));
      want.push_back(state);
    }
    for (const auto& [mesh_text, rules_text] : layouts) {
      SCOPED_TRACE(mesh_text + " " + rules_text);
      ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(mesh_text));
      ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(rules_text, mesh));
      ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
      ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(program, {&CpuKernels()}));
      for (int s = 0; s < kSteps; ++s) {
        SCOPED_TRACE(absl::StrCat("step ", s));
        ASSERT_OK(sim->Step(Feeds(s, 0, kBatch), {"loss"}).status());
        ASSERT_OK_AND_ASSIGN(auto vars, sim->Variables());
        ASSERT_EQ(vars.size(), want[s].size());
        for (const auto& [name, value] : want[s]) {
          EXPECT_LT(MaxRelativeError(vars.at(name), value), 1e-5) << name;
        }
      }
    }
  }
}

absl::Status MinimizeStatus(const TrainOptions& o) { return BuildTrainGraph(kBatch, o).status(); }

TEST(OptimizersTest, RefusesBadOptions) {
  struct Case {
    std::function<void(TrainOptions*)> change;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](TrainOptions* o) { o->optimizer = "rmsprop"; }, "TrainOptions.optimizer: unknown "
                                                          "optimizer 'rmsprop'"},
      {[](TrainOptions* o) { o->learning_rate.kind = "cosine"; }, "learning_rate.kind"},
      {[](TrainOptions* o) { o->learning_rate.base = 0; }, "learning_rate.base"},
      {[](TrainOptions* o) { o->learning_rate.base = -1; }, "learning_rate.base"},
      {[](TrainOptions* o) { o->learning_rate.base = NAN; }, "learning_rate.base"},
      {[](TrainOptions* o) {
         o->learning_rate.kind = "linear_warmup";
         o->learning_rate.warmup_steps = -1;
       },
       "learning_rate.warmup_steps"},
      {[](TrainOptions* o) {
         o->learning_rate.kind = "rsqrt_decay";
         o->learning_rate.warmup_steps = -5;
       },
       "learning_rate.warmup_steps"},
      {[](TrainOptions* o) {
         o->optimizer = "momentum";
         o->momentum = 1.0f;
       },
       "TrainOptions.momentum"},
      {[](TrainOptions* o) {
         o->optimizer = "adam";
         o->beta1 = 1.0f;
       },
       "TrainOptions.beta1"},
      {[](TrainOptions* o) {
         o->optimizer = "adamw";
         o->beta2 = -0.1f;
       },
       "TrainOptions.beta2"},
      {[](TrainOptions* o) {
         o->optimizer = "adam";
         o->epsilon = -1e-8f;
       },
       "TrainOptions.epsilon"},
      {[](TrainOptions* o) {
         o->optimizer = "adamw";
         o->weight_decay = -0.1f;
       },
       "TrainOptions.weight_decay"},
      {[](TrainOptions* o) { o->weight_decay = 0.1f; }, "TrainOptions.weight_decay"},
      {[](TrainOptions* o) {
         o->optimizer = "adafactor";
         o->adafactor_decay = 0;
       },
       "TrainOptions.adafactor_decay"},
      {[](TrainOptions* o) {
         o->optimizer = "adafactor";
         o->adafactor_epsilon = -1;
       },
       "TrainOptions.adafactor_epsilon"},
      {[](TrainOptions* o) {
         o->optimizer = "adafactor";
         o->adafactor_clip = -1;
       },
       "TrainOptions.adafactor_clip"},
      {[](TrainOptions* o) { o->clip_global_norm = -1; }, "TrainOptions.clip_global_norm"},
      {[](TrainOptions* o) { o->microbatches = 0; }, "TrainOptions.microbatches"},
  };
  for (const Case& c : cases) {
    TrainOptions o;
    c.change(&o);
    EXPECT_TRUE(StatusIs(MinimizeStatus(o), absl::StatusCode::kInvalidArgument, {c.field}));
  }
  // A constant schedule ignores warmup_steps; the other optimizers' fields are not checked.
  TrainOptions ok;
  ok.learning_rate.warmup_steps = -1;
  ok.beta1 = 7;
  EXPECT_TRUE(MinimizeStatus(ok).ok());

  // Bad loss and variables.
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"n", 3}}));
  TensorRef v = b.Variable("v", Shape({{"n", 3}}));
  TensorRef per_element = b.Mul(x, v);
  TensorRef loss = b.ReduceSum(per_element, {}, "loss");
  EXPECT_TRUE(StatusIs(Minimize(b, per_element, {v}, {}).status(),
                       absl::StatusCode::kInvalidArgument, {"loss", "scalar", "[n:3]"}));
  EXPECT_TRUE(StatusIs(Minimize(b, loss, {v, x}, {}).status(), absl::StatusCode::kInvalidArgument,
                       {"variables[1] 'x'", "placeholder", "not a variable"}));
  EXPECT_TRUE(StatusIs(Minimize(b, loss, {v, v}, {}).status(), absl::StatusCode::kInvalidArgument,
                       {"variables[1] 'v'", "twice"}));
  EXPECT_TRUE(StatusIs(Minimize(b, loss, {}, {}).status(), absl::StatusCode::kInvalidArgument,
                       {"variables"}));
  // None of the refusals touched the builder: a good call still works.
  ASSERT_OK_AND_ASSIGN(TrainOps ops, Minimize(b, loss, {v}, {}));
  ASSERT_OK(b.Build().status());

  // A global_step the model already made (e.g. for text_windows) is reused, if it is a float32
  // scalar variable.
  GraphBuilder b2;
  TensorRef step = b2.Variable("global_step", Shape({}));
  TensorRef v2 = b2.Variable("v", Shape({{"n", 3}}), {"ones"});
  TensorRef loss2 = b2.ReduceSum(b2.Mul(b2.Mul(v2, v2), step), {}, "loss");
  ASSERT_OK_AND_ASSIGN(TrainOps ops2, Minimize(b2, loss2, {v2}, {}));
  EXPECT_EQ(ops2.global_step.name, "global_step");
  ASSERT_OK(b2.Build().status());
  GraphBuilder b3;
  b3.Placeholder("global_step", Shape({}));
  TensorRef v3 = b3.Variable("v", Shape({{"n", 3}}));
  EXPECT_TRUE(StatusIs(Minimize(b3, b3.ReduceSum(v3, {}), {v3}, {}).status(),
                       absl::StatusCode::kInvalidArgument, {"global_step", "placeholder"}));
}

}  // namespace
}  // namespace meshrt
