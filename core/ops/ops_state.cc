// State ops: variable, assign, assign_add (conventions in core/ops/ops_state.h).
#include "core/ops/ops_state.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/ops/lower_ops.h"
#include "core/ops/op_cost.h"
#include "core/ops/ops.h"
#include "core/ops/ops_random.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

const std::set<std::string>& Initializers() {
  static const auto* names = new std::set<std::string>{
      "zeros",           "ones",         "constant",      "uniform",
      "normal",          "truncated_normal", "glorot_uniform", "glorot_normal"};
  return *names;
}

// fan_in and fan_out of a glorot initializer (see ops_state.h).
absl::StatusOr<std::pair<double, double>> Fans(const v1::Op& op, const Shape& shape) {
  std::set<std::string> in_dims(op.dims().begin(), op.dims().end());
  if (in_dims.empty()) {
    for (int d = 0; d + 1 < shape.rank(); ++d) in_dims.insert(shape.dim(d).name);
  }
  double fan_in = 1, fan_out = 1;
  for (const std::string& name : in_dims) {
    if (shape.IndexOf(name) < 0) {
      return OpError(op, absl::StrCat("fan-in dim '", name, "' is not in shape ", shape.ToString()));
    }
  }
  for (const Dim& d : shape.dims()) (in_dims.count(d.name) ? fan_in : fan_out) *= d.size;
  return std::make_pair(fan_in, fan_out);
}

absl::StatusOr<TensorType> InferVariable(const v1::Op& op, const std::vector<TensorType>&) {
  ASSIGN_OR_RETURN(Shape shape,
                   Shape::FromProto(op.shape(), absl::StrCat("variable '", op.name(), "' shape")));
  DType dtype = DType::kFloat32;
  if (op.dtype() != v1::DT_INVALID) {
    auto d = DTypeFromProto(op.dtype());
    if (!d.ok()) return OpError(op, d.status().message());
    dtype = *d;
  }
  const std::string init = StringAttrOr(op, "initializer", "zeros");
  if (!Initializers().count(init)) {
    return OpError(op, absl::StrCat("unknown initializer '", init,
                                    "'; known: zeros, ones, constant, uniform, normal, "
                                    "truncated_normal, glorot_uniform, glorot_normal"));
  }
  const bool fill = init == "zeros" || init == "ones" || init == "constant";
  if (!fill && dtype != DType::kFloat32) {
    return OpError(op, absl::StrCat("initializer '", init, "' draws float32 only"));
  }
  if (init == "constant" && !op.attrs().count("value")) {
    return OpError(op, "initializer 'constant' needs attrs.value");
  }
  if (init == "uniform" && !(FloatAttrOr(op, "minval", 0) <= FloatAttrOr(op, "maxval", 1))) {
    return OpError(op, "needs minval <= maxval");
  }
  if ((init == "normal" || init == "truncated_normal") && !(FloatAttrOr(op, "stddev", 1) >= 0)) {
    return OpError(op, "needs stddev >= 0");
  }
  if (init.rfind("glorot", 0) == 0) RETURN_IF_ERROR(Fans(op, shape).status());
  return TensorType{std::move(shape), dtype};
}

absl::StatusOr<TensorType> InferUpdate(const v1::Op& op, const std::vector<TensorType>& in) {
  if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype) {
    return OpError(op, absl::StrCat("variable '", op.inputs(0), "' is ", DTypeName(in[0].dtype),
                                    in[0].shape.ToString(), " but ", op.type() == "assign" ? "the value '" : "the delta '",
                                    op.inputs(1), "' is ", DTypeName(in[1].dtype),
                                    in[1].shape.ToString(), "; they must match exactly"));
  }
  return in[0];
}

// The initial value of this slice of the variable (whole tensor without _slice_begin).
absl::Status VariableKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (!in.empty()) return OpError(op, "takes no inputs");
  const std::string init = StringAttrOr(op, "initializer", "zeros");
  const int64_t n = out->num_elements();
  if (init == "zeros" || init == "ones" || init == "constant") {
    const float v = init == "zeros" ? 0.0f : init == "ones" ? 1.0f : FloatAttrOr(op, "value", 0);
    for (int64_t i = 0; i < n; ++i) {
      if (out->dtype() == DType::kFloat32) {
        out->f32()[i] = v;
      } else {
        out->i32()[i] = static_cast<int32_t>(v);
      }
    }
    return absl::OkStatus();
  }
  if (out->dtype() != DType::kFloat32) return OpError(op, "random initializers are float32 only");
  ASSIGN_OR_RETURN(const std::vector<uint64_t> index, rng::GlobalIndices(op, out->shape()));
  const uint64_t key = rng::StreamKey(IntAttrOr(op, "seed", 0), op.name());
  float* o = out->f32();
  double lo = FloatAttrOr(op, "minval", 0), hi = FloatAttrOr(op, "maxval", 1);
  double mean = FloatAttrOr(op, "mean", 0), stddev = FloatAttrOr(op, "stddev", 1);
  bool uniform = init == "uniform", truncated = init == "truncated_normal";
  if (init == "glorot_uniform" || init == "glorot_normal") {
    // Fans come from the global shape: the attrs give it when this is a slice.
    Shape global = out->shape();
    if (op.attrs().count("_global_sizes")) {
      ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntListAttr(op, "_global_sizes"));
      std::vector<Dim> dims = global.dims();
      for (size_t d = 0; d < dims.size() && d < sizes.size(); ++d) dims[d].size = sizes[d];
      global = Shape(dims);
    }
    ASSIGN_OR_RETURN(const auto fans, Fans(op, global));
    const double sum = fans.first + fans.second;
    uniform = init == "glorot_uniform";
    lo = -std::sqrt(6.0 / sum);
    hi = -lo;
    mean = 0;
    stddev = std::sqrt(2.0 / sum);
  }
  for (size_t i = 0; i < index.size(); ++i) {
    if (uniform) {
      o[i] = static_cast<float>(lo + (hi - lo) * rng::Uniform(rng::Draw(key, index[i], 0)));
      continue;
    }
    double z = rng::Normal(rng::Draw(key, index[i], 0), rng::Draw(key, index[i], 1));
    // Truncation: redraw from derived streams (same for every layout); clamp after 32 tries.
    for (uint64_t attempt = 1; truncated && std::abs(z) > 2.0 && attempt <= 32; ++attempt) {
      const uint64_t k = key ^ (attempt * 0xD1B54A32D192ED03ULL);
      z = rng::Normal(rng::Draw(k, index[i], 0), rng::Draw(k, index[i], 1));
    }
    if (truncated) z = std::max(-2.0, std::min(2.0, z));
    o[i] = static_cast<float>(mean + stddev * z);
  }
  return absl::OkStatus();
}

absl::Status UpdateKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.size() != 2) return OpError(op, "takes two inputs");
  const Tensor& v = *in[0];
  const Tensor& x = *in[1];
  if (v.shape() != x.shape() || v.dtype() != x.dtype() || out->shape() != v.shape() ||
      out->dtype() != v.dtype()) {
    return OpError(op, "inputs and output must have one type");
  }
  const bool add = op.type() == "assign_add";
  for (int64_t i = 0; i < v.num_elements(); ++i) {
    if (v.dtype() == DType::kFloat32) {
      out->f32()[i] = add ? v.f32()[i] + x.f32()[i] : x.f32()[i];
    } else {
      out->i32()[i] = add ? v.i32()[i] + x.i32()[i] : x.i32()[i];
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LaidOutTensor> LowerVariable(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>&) {
  const TensorType& type = ctx.graph.type(op.name());
  return ctx.builder.AddVariable(op, type.shape, type.dtype, ctx.RuleLayout(type.shape));
}

absl::StatusOr<LaidOutTensor> LowerUpdate(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs) {
  const LaidOutTensor& var = inputs[0];
  ASSIGN_OR_RETURN(LaidOutTensor value, ctx.builder.Reshard(inputs[1], var.layout, op.name()));
  if (op.type() == "assign_add") {
    v1::Op add;
    add.set_name(op.name());
    add.set_type("add");
    ASSIGN_OR_RETURN(value,
                     ctx.builder.EmitLocal(add, {var, value}, var.shape, var.dtype, var.layout));
  }
  RETURN_IF_ERROR(ctx.builder.SetVariableUpdate(op.inputs(0), value));
  return value;
}

std::vector<OpInfo> StateOps() {
  std::vector<OpInfo> ops = {
    {"variable", OpFamily::kSource, 0, 0, false,
     "state kept on the workers between steps; attrs.initializer (zeros, ones, constant, uniform, "
     "normal, truncated_normal, glorot_uniform, glorot_normal)",
     "none (each processor initialises its own slice)", true, InferVariable, VariableKernel,
     LowerVariable},
    {"assign", OpFamily::kSource, 2, 2, false,
     "variable inputs[0] holds inputs[1] after the step; output: the new value",
     "reshard of the value to the variable's layout", false, InferUpdate, UpdateKernel,
     LowerUpdate},
    {"assign_add", OpFamily::kSource, 2, 2, false,
     "variable inputs[0] holds inputs[0] + inputs[1] after the step; output: the new value",
     "reshard of the delta to the variable's layout", false, InferUpdate, UpdateKernel,
     LowerUpdate, nullptr, &PerOutputElementCost<1>},  // one add per element (core/ops/op_cost.h)
  };
  ops[0].source = SourceKind::kVariable;
  ops[1].updates_variable = ops[2].updates_variable = true;  // assign, assign_add
  return ops;
}

const bool kRegistered = RegisterOps(StateOps());

absl::Status CheckBody(const v1::Op& loop) {
  for (const v1::Op& op : loop.body().ops()) {
    if (IsVariable(op) || IsVariableUpdate(op.type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op '", op.name(), "' (", op.type(), ") is in the body of loop '", loop.name(),
          "'; loop bodies hold no state — keep variables and their updates outside the loop"));
    }
    if (op.has_body()) RETURN_IF_ERROR(CheckBody(op));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsVariableUpdate(const std::string& op_type) {
  const OpInfo* info = FindOp(op_type);
  return info != nullptr && info->updates_variable;
}

absl::Status CheckStateOps(const v1::Graph& graph) {
  std::map<std::string, const v1::Op*> ops;
  for (const v1::Op& op : graph.ops()) ops[op.name()] = &op;
  std::map<std::string, std::string> updated_by;  // variable -> op
  for (const v1::Op& op : graph.ops()) {
    if (op.has_body()) RETURN_IF_ERROR(CheckBody(op));
    if (!IsVariableUpdate(op.type())) continue;
    const v1::Op* target = ops.at(op.inputs(0));
    if (!IsVariable(*target)) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op.name(), "' (", op.type(), ") updates '", op.inputs(0),
                       "', which is a ", target->type(), ", not a variable"));
    }
    auto [it, inserted] = updated_by.emplace(op.inputs(0), op.name());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", op.inputs(0), "' is updated twice in one graph, by '", it->second,
          "' and by '", op.name(), "'; combine the updates into one assign"));
    }
  }
  return absl::OkStatus();
}

}  // namespace meshrt
