#include "core/train/optimizers.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ops/ops_state.h"
#include "core/train/autodiff.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

absl::Status Bad(const std::string& field, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat("TrainOptions.", field, ": ", msg));
}

// [0, 1), NaN refused.
absl::Status CheckUnitInterval(const std::string& field, float x) {
  if (!(x >= 0.0f && x < 1.0f)) return Bad(field, absl::StrCat(x, " must be in [0, 1)"));
  return absl::OkStatus();
}

absl::Status CheckNonNegative(const std::string& field, float x) {
  if (!(x >= 0.0f) || std::isinf(x)) {
    return Bad(field, absl::StrCat(x, " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

struct OptimizerRule;
const OptimizerRule* FindOptimizer(const std::string& name);
std::string OptimizerNames();
absl::Status CheckOptimizerOptions(const OptimizerRule& rule, const TrainOptions& o);

absl::Status CheckOptions(const TrainOptions& o) {
  const OptimizerRule* rule = FindOptimizer(o.optimizer);
  if (rule == nullptr) {
    return Bad("optimizer", absl::StrCat("unknown optimizer '", o.optimizer, "' (",
                                         OptimizerNames(), ")"));
  }
  const LearningRate& lr = o.learning_rate;
  if (lr.kind != "constant" && lr.kind != "linear_warmup" && lr.kind != "rsqrt_decay") {
    return Bad("learning_rate.kind", absl::StrCat("unknown schedule '", lr.kind,
                                                  "' (constant, linear_warmup, rsqrt_decay)"));
  }
  if (!(lr.base > 0.0f) || std::isinf(lr.base)) {
    return Bad("learning_rate.base", absl::StrCat(lr.base, " must be finite and > 0"));
  }
  if (lr.kind != "constant" && lr.warmup_steps < 0) {
    return Bad("learning_rate.warmup_steps",
               absl::StrCat(lr.warmup_steps, " must be >= 0 for schedule '", lr.kind, "'"));
  }
  RETURN_IF_ERROR(CheckOptimizerOptions(*rule, o));
  RETURN_IF_ERROR(CheckNonNegative("clip_global_norm", o.clip_global_norm));
  if (o.microbatches < 1) {
    return Bad("microbatches", absl::StrCat(o.microbatches, " must be >= 1"));
  }
  return absl::OkStatus();
}

const v1::Op* FindOpIn(const v1::Graph& g, const std::string& name) {
  for (const v1::Op& op : g.ops()) {
    if (op.name() == name) return &op;
  }
  return nullptr;
}

// Ops with a scalar operand (core/ops/ops_math.h): type(x) {scalar: s [, scalar_first]}.
class Ops {
 public:
  explicit Ops(GraphBuilder& b) : b_(b) {}

  TensorRef WithScalar(const std::string& type, const TensorRef& x, float s,
                       bool scalar_first = false, const std::string& name = "") {
    v1::Op op;
    op.set_type(type);
    (*op.mutable_attrs())["scalar"].set_f(s);
    if (scalar_first) (*op.mutable_attrs())["scalar_first"].set_b(true);
    return b_.Apply(std::move(op), {x}, name);
  }
  TensorRef Unary(const std::string& type, const TensorRef& x, const std::string& name = "") {
    v1::Op op;
    op.set_type(type);
    return b_.Apply(std::move(op), {x}, name);
  }
  TensorRef Binary(const std::string& type, const TensorRef& x, const TensorRef& y,
                   const std::string& name = "") {
    v1::Op op;
    op.set_type(type);
    return b_.Apply(std::move(op), {x, y}, name);
  }
  TensorRef Ones(const Shape& shape) {
    v1::Op op;
    op.set_type("ones");
    *op.mutable_shape() = shape.ToProto();
    return b_.Apply(std::move(op), {});
  }
  // where(cond, x, y)
  TensorRef Where(const TensorRef& cond, const TensorRef& x, const TensorRef& y,
                  const std::string& name = "") {
    v1::Op op;
    op.set_type("where");
    return b_.Apply(std::move(op), {cond, x, y}, name);
  }
  // where(cond, x, s)
  TensorRef WhereScalar(const TensorRef& cond, const TensorRef& x, float s) {
    v1::Op op;
    op.set_type("where");
    (*op.mutable_attrs())["scalar"].set_f(s);
    return b_.Apply(std::move(op), {cond, x});
  }

 private:
  GraphBuilder& b_;
};

// The float32 scalar variable `name`: the builder's if it has one (e.g. a "global_step" the model
// already reads for text_windows), else a new one starting at 0.
absl::StatusOr<TensorRef> CounterVariable(GraphBuilder& b, const std::string& name) {
  const v1::Op* op = FindOpIn(b.proto(), name);
  if (op == nullptr) return b.Variable(name, Shape({}));
  if (!IsVariable(*op)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the optimizer's step counter '", name, "' exists as a ", op->type(), " op, not a variable"));
  }
  TensorRef ref{name, Shape({}), DType::kFloat32};
  auto shape = Shape::FromProto(op->shape());
  if (!shape.ok() || shape->rank() != 0 ||
      (op->dtype() != v1::DT_INVALID && op->dtype() != DTypeToProto(DType::kFloat32))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the optimizer's step counter variable '", name, "' must be a float32 scalar"));
  }
  return ref;
}

// A zero-initialised float32 variable marked as a microbatch accumulator used where `apply` is
// nonzero (core/ops/ops_state.h): the lowering may then keep it as a partial sum and resolve the
// accumulated gradient once per cycle instead of every microbatch (core/lowering/lower_accumulate.cc).
TensorRef Accumulator(GraphBuilder& b, const std::string& name, const Shape& shape,
                      const std::string& apply) {
  v1::Op op;
  op.set_type("variable");
  *op.mutable_shape() = shape.ToProto();
  op.set_dtype(DTypeToProto(DType::kFloat32));
  (*op.mutable_attrs())["initializer"].set_s("zeros");
  (*op.mutable_attrs())[kAccumulatorApplyAttr].set_s(apply);
  return b.Apply(std::move(op), {}, name);
}

// The learning rate at update t (a scalar tensor, t counting from 1).
TensorRef Schedule(GraphBuilder& b, Ops& ops, const LearningRate& lr, const TensorRef& t) {
  const std::string name = "learning_rate";  // in the caller's "train" scope
  if (lr.kind == "constant") return b.Scale(ops.Ones(Shape({})), lr.base, name);
  // warmup_steps 0 behaves as 1: t >= 1, so min(1, t / 1) = 1 and max(t, 1) / 1 = t.
  const float w = static_cast<float>(std::max<int64_t>(lr.warmup_steps, 1));
  TensorRef warm = ops.WithScalar("minimum", ops.WithScalar("div", t, w), 1.0f);
  if (lr.kind == "linear_warmup") return b.Scale(warm, lr.base, name);
  TensorRef decay = ops.Unary("rsqrt", ops.WithScalar("div", ops.WithScalar("maximum", t, w), w));
  return b.Scale(b.Mul(warm, decay), lr.base, name);
}

// Shape without dim i.
Shape Drop(const Shape& s, int i) {
  std::vector<Dim> dims = s.dims();
  dims.erase(dims.begin() + i);
  return Shape(std::move(dims));
}

// ---- The optimizers, registered by name ---------------------------------------------------------

// What an optimizer's rule builds with, for one Minimize call.
struct UpdateContext {
  GraphBuilder& b;
  Ops& ops;
  const TrainOptions& o;
  // Scalars every variable's update shares (made once by the rule's `prepare`, by name).
  std::map<std::string, TensorRef> shared;
  // Assigns a slot its new value (kept as is on the steps that only accumulate microbatches).
  std::function<void(const TensorRef& var, const TensorRef& value)> update;
};

// One optimizer: its options' checks, the scalars its variables share (from t, the update number
// counting from 1), and a variable's step — w_new = w - lr * step — making and updating the
// variable's slots ("<w>/m", ...). Every op it adds is under "<w>/<optimizer>/" (Minimize).
struct OptimizerRule {
  const char* name;
  absl::Status (*check)(const TrainOptions& o);  // null: nothing to check
  void (*prepare)(UpdateContext& c, const TensorRef& t);  // null: nothing shared
  TensorRef (*step)(UpdateContext& c, const TensorRef& w, const TensorRef& g);
  bool weight_decay = false;  // applies TrainOptions.weight_decay (others refuse it)
  bool adaptive = false;      // steps scaled by a running gradient-size estimate (IsAdaptiveOptimizer)
};

TensorRef SgdStep(UpdateContext&, const TensorRef&, const TensorRef& g) { return g; }

absl::Status CheckMomentum(const TrainOptions& o) {
  return CheckUnitInterval("momentum", o.momentum);
}
TensorRef MomentumStep(UpdateContext& c, const TensorRef& w, const TensorRef& g) {
  TensorRef m = c.b.Variable(w.name + "/m", w.shape);
  TensorRef step = c.b.Add(c.b.Scale(m, c.o.momentum), g);
  c.update(m, step);
  return step;
}

absl::Status CheckAdam(const TrainOptions& o) {
  RETURN_IF_ERROR(CheckUnitInterval("beta1", o.beta1));
  RETURN_IF_ERROR(CheckUnitInterval("beta2", o.beta2));
  return CheckNonNegative("epsilon", o.epsilon);
}
absl::Status CheckAdamW(const TrainOptions& o) {
  RETURN_IF_ERROR(CheckAdam(o));
  return CheckNonNegative("weight_decay", o.weight_decay);
}
void PrepareAdam(UpdateContext& c, const TensorRef& t) {
  // 1 - beta^t
  c.shared["bias1"] = c.ops.WithScalar("sub", c.ops.WithScalar("pow", t, c.o.beta1, true), 1.0f,
                                       true, "bias_correction1");
  c.shared["bias2"] = c.ops.WithScalar("sub", c.ops.WithScalar("pow", t, c.o.beta2, true), 1.0f,
                                       true, "bias_correction2");
}
TensorRef AdamStep(UpdateContext& c, const TensorRef& w, const TensorRef& g) {
  GraphBuilder& b = c.b;
  TensorRef m = b.Variable(w.name + "/m", w.shape);
  TensorRef v = b.Variable(w.name + "/v", w.shape);
  TensorRef m_new = b.Add(b.Scale(m, c.o.beta1), b.Scale(g, 1.0f - c.o.beta1));
  TensorRef v_new =
      b.Add(b.Scale(v, c.o.beta2), b.Scale(c.ops.Unary("square", g), 1.0f - c.o.beta2));
  c.update(m, m_new);
  c.update(v, v_new);
  TensorRef m_hat = b.Div(m_new, c.shared.at("bias1"));
  TensorRef v_hat = b.Div(v_new, c.shared.at("bias2"));
  return b.Div(m_hat, c.ops.WithScalar("add", c.ops.Unary("sqrt", v_hat), c.o.epsilon));
}
TensorRef AdamWStep(UpdateContext& c, const TensorRef& w, const TensorRef& g) {
  TensorRef step = AdamStep(c, w, g);
  if (c.o.weight_decay <= 0.0f) return step;
  return c.b.Add(step, c.b.Scale(w, c.o.weight_decay));  // decoupled: lr * wd * w
}

absl::Status CheckAdafactor(const TrainOptions& o) {
  if (!(o.adafactor_decay > 0.0f && o.adafactor_decay <= 1.0f)) {
    return Bad("adafactor_decay", absl::StrCat(o.adafactor_decay, " must be in (0, 1]"));
  }
  RETURN_IF_ERROR(CheckNonNegative("adafactor_epsilon", o.adafactor_epsilon));
  return CheckNonNegative("adafactor_clip", o.adafactor_clip);
}
void PrepareAdafactor(UpdateContext& c, const TensorRef& t) {
  TensorRef rho = c.ops.WithScalar("pow", t, -c.o.adafactor_decay, false, "adafactor_rho");
  c.shared["rho"] = rho;  // 1 - beta2_t
  c.shared["beta2"] = c.ops.WithScalar("sub", rho, 1.0f, true, "adafactor_beta2");
}
TensorRef AdafactorStep(UpdateContext& c, const TensorRef& w, const TensorRef& g) {
  GraphBuilder& b = c.b;
  Ops& ops = c.ops;
  const TensorRef& rho = c.shared.at("rho");
  const TensorRef& beta2_t = c.shared.at("beta2");
  TensorRef g2 = ops.WithScalar("add", ops.Unary("square", g), c.o.adafactor_epsilon);
  TensorRef x;
  const int r = w.shape.rank();
  if (r >= 2) {
    const std::string row = w.shape.dim(r - 2).name, col = w.shape.dim(r - 1).name;
    TensorRef vr = b.Variable(w.name + "/vr", Drop(w.shape, r - 1));
    TensorRef vc = b.Variable(w.name + "/vc", Drop(w.shape, r - 2));
    TensorRef vr_new = b.Add(b.Mul(vr, beta2_t), b.Mul(b.ReduceMean(g2, {col}), rho));
    TensorRef vc_new = b.Add(b.Mul(vc, beta2_t), b.Mul(b.ReduceMean(g2, {row}), rho));
    c.update(vr, vr_new);
    c.update(vc, vc_new);
    // v_hat = vr (x) vc / mean(vr over rows); x = g / sqrt(v_hat).
    TensorRef row_factor = ops.Unary("rsqrt", b.Div(vr_new, b.ReduceMean(vr_new, {row})));
    x = b.Mul(b.Mul(g, row_factor), ops.Unary("rsqrt", vc_new));
  } else {
    TensorRef v = b.Variable(w.name + "/v", w.shape);
    TensorRef v_new = b.Add(b.Mul(v, beta2_t), b.Mul(g2, rho));
    c.update(v, v_new);
    x = b.Mul(g, ops.Unary("rsqrt", v_new));
  }
  if (c.o.adafactor_clip > 0.0f) {
    // x / max(1, rms(x) / clip)
    TensorRef rms = ops.Unary("sqrt", b.ReduceMean(ops.Unary("square", x), {}));
    x = b.Div(x, ops.WithScalar("maximum", ops.WithScalar("div", rms, c.o.adafactor_clip), 1.0f));
  }
  return x;
}

// The registry: a new optimizer is one record here and its functions above.
const std::vector<OptimizerRule>& OptimizerRules() {
  static const auto* rules = new std::vector<OptimizerRule>{
      {"sgd", nullptr, nullptr, &SgdStep},
      {"momentum", &CheckMomentum, nullptr, &MomentumStep},
      {"adam", &CheckAdam, &PrepareAdam, &AdamStep, /*weight_decay=*/false, /*adaptive=*/true},
      {"adamw", &CheckAdamW, &PrepareAdam, &AdamWStep, /*weight_decay=*/true, /*adaptive=*/true},
      {"adafactor", &CheckAdafactor, &PrepareAdafactor, &AdafactorStep, /*weight_decay=*/false,
       /*adaptive=*/true},
  };
  return *rules;
}

const OptimizerRule* FindOptimizer(const std::string& name) {
  for (const OptimizerRule& r : OptimizerRules()) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

std::string OptimizerNames() {
  std::string out;
  for (const OptimizerRule& r : OptimizerRules()) absl::StrAppend(&out, out.empty() ? "" : ", ", r.name);
  return out;
}

absl::Status CheckOptimizerOptions(const OptimizerRule& rule, const TrainOptions& o) {
  if (rule.check != nullptr) RETURN_IF_ERROR(rule.check(o));
  if (!rule.weight_decay && o.weight_decay != 0.0f) {
    return Bad("weight_decay", absl::StrCat(o.weight_decay,
                                            " is set but only adamw applies it (optimizer '",
                                            o.optimizer, "')"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainOps> Minimize(GraphBuilder& b, const TensorRef& loss,
                                  const std::vector<TensorRef>& variables,
                                  const TrainOptions& options,
                                  const std::vector<TensorRef>& also) {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(b.status());
  const TrainOptions& o = options;
  if (loss.shape.rank() != 0 || loss.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("loss '", loss.name, "' must be a float32 "
                                                   "scalar, not ",
                                                   loss.shape.ToString()));
  }
  if (variables.empty()) return absl::InvalidArgumentError("variables: none to train");
  std::set<std::string> seen;
  for (size_t i = 0; i < variables.size(); ++i) {
    const TensorRef& v = variables[i];
    const v1::Op* op = FindOpIn(b.proto(), v.name);
    const std::string what = absl::StrCat("variables[", i, "] '", v.name, "'");
    if (op == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is not an op of this builder"));
    }
    if (!IsVariable(*op)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is a ", op->type(), " op, not a variable"));
    }
    if (v.dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is not float32"));
    }
    if (v.name == "global_step" || v.name == "micro_step") {
      return absl::InvalidArgumentError(absl::StrCat(what, " is the optimizer's step counter"));
    }
    if (!seen.insert(v.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is listed twice"));
    }
  }

  for (size_t i = 0; i < also.size(); ++i) {
    if (also[i].dtype != DType::kFloat32 || FindOpIn(b.proto(), also[i].name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "also[", i, "] '", also[i].name, "' is not a float32 tensor of this builder"));
    }
  }
  std::vector<TensorRef> wrt = variables;
  wrt.insert(wrt.end(), also.begin(), also.end());
  ASSIGN_OR_RETURN(std::vector<TensorRef> grads, Gradients(b, loss, wrt));
  std::vector<TensorRef> other_gradients(grads.begin() + variables.size(), grads.end());
  grads.resize(variables.size());
  Ops ops(b);
  const int k = o.microbatches;
  // Names: the shared ops under "train/" (train/t, train/learning_rate, train/update/<variable>),
  // each variable's under its own name (<variable>/adam/..., <variable>/accumulate/...), so a trace
  // ties every update op to the weight it serves.
  auto train_scope = b.NameScopeAt("train");

  // Counters. global_step counts steps run (microbatches included); it is read at the step's start.
  ASSIGN_OR_RETURN(TensorRef global_step, CounterVariable(b, "global_step"));
  b.AssignAdd(global_step, ops.Ones(Shape({})), "update/global_step");

  // t: the number of the update applied by this step, counting from 1. With K microbatches an
  // update is applied at the steps where micro_step == K - 1, i.e. global_step = K*n + K - 1 for the
  // (n+1)-th update: t = (global_step - micro_step) / K + 1 = floor(global_step / K) + 1, exact in
  // float32 (a whole multiple of K divided by K). On the other steps t is that of the coming update.
  TensorRef t, apply, accumulating;
  if (k == 1) {
    t = ops.WithScalar("add", global_step, 1.0f, false, "t");
  } else {
    ASSIGN_OR_RETURN(TensorRef micro, CounterVariable(b, "micro_step"));
    apply = ops.WithScalar("equal", micro, static_cast<float>(k - 1), false, "apply");
    accumulating = ops.WithScalar("less", micro, static_cast<float>(k - 1));
    b.Assign(micro, ops.WhereScalar(accumulating, ops.WithScalar("add", micro, 1.0f), 0.0f),
             "update/micro_step");
    t = ops.WithScalar("add",
                       ops.WithScalar("div", b.Sub(global_step, micro), static_cast<float>(k)),
                       1.0f, false, "t");
    // Accumulate: acc holds the sum of this cycle's earlier gradients; the applied gradient is the
    // mean of the K (with loss = a mean over each equal-sized microbatch, that is the gradient of
    // the mean loss over the K microbatches together).
    // Every sum before the first mean: distributed, each sum's allreduce (once per cycle) then
    // waits for the first mean, and the small ones fuse into one (runtime/executor.h).
    std::vector<TensorRef> sums;
    for (size_t i = 0; i < variables.size(); ++i) {
      const TensorRef& v = variables[i];
      TensorRef acc = Accumulator(b, v.name + "/acc", v.shape, apply.name);
      auto scope = b.NameScopeAt(v.name + "/accumulate");
      sums.push_back(b.Add(acc, grads[i]));
      TensorRef kept = ops.WhereScalar(accumulating, sums.back(), 0.0f);
      auto top = b.NameScopeAt("train");
      b.Assign(acc, kept, "update/" + acc.name);
    }
    for (size_t i = 0; i < variables.size(); ++i) {
      auto scope = b.NameScopeAt(variables[i].name + "/accumulate");
      grads[i] = ops.WithScalar("div", sums[i], static_cast<float>(k));
    }
  }

  // Global norm (always computed, reported in TrainOps) and clipping.
  TensorRef total;
  for (size_t i = 0; i < grads.size(); ++i) {
    auto scope = b.NameScopeAt(variables[i].name + "/grad_norm");
    TensorRef sq = b.ReduceSum(ops.Unary("square", grads[i]), {});
    total = i == 0 ? sq : b.Add(total, sq);
  }
  TensorRef global_norm = ops.Unary("sqrt", total, "global_norm");
  if (o.clip_global_norm > 0.0f) {
    const float c = o.clip_global_norm;
    TensorRef factor = ops.WithScalar("div", ops.WithScalar("maximum", global_norm, c), c,
                                      /*scalar_first=*/true, "clip_factor");
    for (size_t i = 0; i < grads.size(); ++i) {
      auto scope = b.NameScopeAt(variables[i].name + "/clip");
      grads[i] = b.Mul(grads[i], factor);
    }
  }

  TensorRef lr = Schedule(b, ops, o.learning_rate, t);

  // Assigns `value` to `var`, or keeps `var` on the steps that only accumulate.
  auto update = [&](const TensorRef& var, const TensorRef& value) {
    const TensorRef kept = k == 1 ? value : ops.Where(apply, value, var);
    auto top = b.NameScopeAt("train");
    b.Assign(var, kept, "update/" + var.name);
  };
  const OptimizerRule& rule = *FindOptimizer(o.optimizer);  // CheckOptions found it
  UpdateContext c{b, ops, o, {}, update};
  if (rule.prepare != nullptr) rule.prepare(c, t);  // scalars shared by every variable
  for (size_t i = 0; i < variables.size(); ++i) {
    const TensorRef& w = variables[i];
    auto scope = b.NameScopeAt(w.name + "/" + o.optimizer);
    const TensorRef step = rule.step(c, w, grads[i]);  // w_new = w - lr * step
    update(w, b.Sub(w, b.Mul(step, lr)));
  }
  RETURN_IF_ERROR(b.status());

  TrainOps out;
  out.loss = loss;
  out.gradients = grads;
  out.global_norm = global_norm;
  out.other_gradients = other_gradients;
  out.learning_rate = lr;
  out.global_step = global_step;
  return out;
}

bool IsAdaptiveOptimizer(const std::string& name) {
  const OptimizerRule* rule = FindOptimizer(name);
  return rule != nullptr && rule->adaptive;
}

}  // namespace meshrt
