// The random and fill source ops: shape inference, reference kernels (which are also the only
// kernels: //kernels falls back to them, so every runner draws bitwise the same numbers) and
// registration. Conventions and the generator are described in core/ops/ops_random.h.
#include "core/ops/ops_random.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "core/ops/op_cost.h"
#include "core/ops/ops.h"
#include "core/ops/ops_dataset.h"
#include "util/hash.h"
#include "util/status_macros.h"

namespace meshrt {
namespace rng {
namespace {

constexpr uint64_t kGolden = kSplitMix64Gamma;

uint64_t Mix(uint64_t z) { return SplitMix64(z); }

}  // namespace

uint64_t StreamKey(int64_t seed, const std::string& op_name) {
  return Mix(Mix(static_cast<uint64_t>(seed)) ^ Fnv1a64(op_name));
}

uint64_t Draw(uint64_t key, uint64_t index, int counter) {
  return Mix(key + (2 * index + static_cast<uint64_t>(counter) + 1) * kGolden);
}

float Uniform(uint64_t draw) { return static_cast<float>(draw >> 40) * (1.0f / 16777216.0f); }

uint64_t StepKey(uint64_t key, int64_t step) {
  return Mix(key ^ Mix(static_cast<uint64_t>(step) + kGolden));
}

double Normal(uint64_t draw0, uint64_t draw1) {
  const double u1 = (static_cast<double>(draw0 >> 40) + 1.0) / 16777216.0;  // (0, 1]
  const double u2 = static_cast<double>(draw1 >> 40) / 16777216.0;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

absl::StatusOr<std::vector<uint64_t>> GlobalIndices(const v1::Op& op, const Shape& slice) {
  std::vector<int64_t> begin(slice.rank(), 0), global = slice.Sizes();
  if (op.attrs().count("_slice_begin")) {
    ASSIGN_OR_RETURN(begin, IntListAttr(op, "_slice_begin"));
    ASSIGN_OR_RETURN(global, IntListAttr(op, "_global_sizes"));
  }
  if (static_cast<int>(begin.size()) != slice.rank() ||
      static_cast<int>(global.size()) != slice.rank()) {
    return OpError(op, "_slice_begin and _global_sizes need one entry per output dim");
  }
  for (int d = 0; d < slice.rank(); ++d) {
    if (begin[d] < 0 || begin[d] + slice.dim(d).size > global[d]) {
      return OpError(op, absl::StrCat("slice ", slice.ToString(), " at ", begin[d],
                                      " does not fit global size ", global[d], " of dim ", d));
    }
  }
  std::vector<uint64_t> out(slice.num_elements());
  std::vector<int64_t> idx(slice.rank(), 0);
  for (uint64_t& g : out) {
    uint64_t flat = 0;
    for (int d = 0; d < slice.rank(); ++d) {
      flat = flat * static_cast<uint64_t>(global[d]) + static_cast<uint64_t>(begin[d] + idx[d]);
    }
    g = flat;
    for (int d = slice.rank() - 1; d >= 0 && ++idx[d] == slice.dim(d).size; --d) idx[d] = 0;
  }
  return out;
}

namespace {

absl::StatusOr<TensorType> InferSource(const v1::Op& op, const std::vector<TensorType>& in) {
  if (!in.empty()) RETURN_IF_ERROR(dataset::CheckStepType(op, in[0]));  // random_*'s step
  auto shape = Shape::FromProto(op.shape(), absl::StrCat("op '", op.name(), "' shape"));
  if (!shape.ok()) return OpError(op, shape.status().message());
  DType dtype = DType::kFloat32;
  if (op.dtype() != v1::DT_INVALID) {
    auto d = DTypeFromProto(op.dtype());
    if (!d.ok()) return OpError(op, d.status().message());
    dtype = *d;
  }
  const bool fill = op.type() == "zeros" || op.type() == "ones";
  if (!fill && dtype != DType::kFloat32) return OpError(op, "draws float32 only");
  if (op.type() == "random_uniform" &&
      !(FloatAttrOr(op, "minval", 0.0f) <= FloatAttrOr(op, "maxval", 1.0f))) {
    return OpError(op, "needs minval <= maxval");
  }
  if (op.type() == "random_normal" && !(FloatAttrOr(op, "stddev", 1.0f) >= 0.0f)) {
    return OpError(op, "needs stddev >= 0");
  }
  return TensorType{*std::move(shape), dtype};
}

absl::StatusOr<TensorType> InferDropout(const v1::Op& op, const std::vector<TensorType>& in) {
  if (in[0].dtype != DType::kFloat32) return OpError(op, "needs a float32 input");
  ASSIGN_OR_RETURN(const float rate, FloatAttr(op, "rate"));
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return OpError(op, absl::StrCat("rate ", rate, " must be in [0, 1)"));
  }
  return in[0];
}

absl::Status FillKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (!in.empty()) return OpError(op, "takes no inputs");
  const int value = op.type() == "ones" ? 1 : 0;
  for (int64_t i = 0; i < out->num_elements(); ++i) {
    if (out->dtype() == DType::kFloat32) {
      out->f32()[i] = static_cast<float>(value);
    } else {
      out->i32()[i] = value;
    }
  }
  return absl::OkStatus();
}

absl::Status RandomKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.size() > 1) return OpError(op, "takes at most one input (the step)");
  if (out->dtype() != DType::kFloat32) return absl::UnimplementedError("float32 only");
  ASSIGN_OR_RETURN(const std::vector<uint64_t> index, GlobalIndices(op, out->shape()));
  uint64_t key = StreamKey(IntAttrOr(op, "seed", 0), op.name());
  if (in.size() == 1) {
    ASSIGN_OR_RETURN(const int64_t step, dataset::StepValue(op, *in[0]));
    key = StepKey(key, step);
  }
  float* o = out->f32();
  if (op.type() == "random_uniform") {
    const float lo = FloatAttrOr(op, "minval", 0.0f), hi = FloatAttrOr(op, "maxval", 1.0f);
    for (size_t i = 0; i < index.size(); ++i)
      o[i] = lo + (hi - lo) * Uniform(Draw(key, index[i], 0));
  } else {
    const double mean = FloatAttrOr(op, "mean", 0.0f), stddev = FloatAttrOr(op, "stddev", 1.0f);
    for (size_t i = 0; i < index.size(); ++i) {
      o[i] = static_cast<float>(mean +
                                stddev * Normal(Draw(key, index[i], 0), Draw(key, index[i], 1)));
    }
  }
  return absl::OkStatus();
}

absl::Status DropoutKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.size() != 1) return OpError(op, "takes one input");
  const Tensor& x = *in[0];
  if (x.dtype() != DType::kFloat32 || out->dtype() != DType::kFloat32) {
    return absl::UnimplementedError("float32 only");
  }
  if (x.shape() != out->shape()) {
    return OpError(op, absl::StrCat("output ", out->shape().ToString(), " must match input ",
                                    x.shape().ToString()));
  }
  ASSIGN_OR_RETURN(const float rate, FloatAttr(op, "rate"));
  ASSIGN_OR_RETURN(const std::vector<uint64_t> index, GlobalIndices(op, out->shape()));
  const uint64_t key = StreamKey(IntAttrOr(op, "seed", 0), StringAttrOr(op, "stream", op.name()));
  const float scale = 1.0f / (1.0f - rate);
  for (size_t i = 0; i < index.size(); ++i) {
    out->f32()[i] = Uniform(Draw(key, index[i], 0)) >= rate ? x.f32()[i] * scale : 0.0f;
  }
  return absl::OkStatus();
}

// Costs (core/ops/op_cost.h): the counter-based hash per element, and dropout's compare and scale.
std::vector<OpInfo> WithCosts(std::vector<OpInfo> ops) {
  for (OpInfo& op : ops) {
    if (op.type == "random_uniform" || op.type == "random_normal") {
      op.cost = &PerOutputElementCost<kRandomFlops>;
    } else if (op.type == "dropout") {
      op.cost = &PerOutputElementCost<kRandomFlops + 2>;
    }
  }
  return ops;
}

const bool kRegistered = RegisterOps(WithCosts({
    {"random_uniform", OpFamily::kSource, 0, 1, false,
     "uniform in [attrs.minval, attrs.maxval) keyed on (seed, op name, [step,] global index)",
     "none", true,
     InferSource, RandomKernel, LowerRandom},
    {"random_normal", OpFamily::kSource, 0, 1, false,
     "normal(attrs.mean, attrs.stddev) keyed on (seed, op name, [step,] global index)", "none",
     true,
     InferSource, RandomKernel, LowerRandom},
    {"dropout", OpFamily::kElementwise, 1, 1, true,
     "x / (1 - attrs.rate) where uniform(seed, attrs.stream or op name, global index) >= rate, "
     "else 0", "none",
     true, InferDropout, DropoutKernel, LowerRandom},
    {"zeros", OpFamily::kSource, 0, 0, false, "a tensor of `shape` filled with 0", "none", false,
     InferSource, FillKernel, LowerRandom},
    {"ones", OpFamily::kSource, 0, 0, false, "a tensor of `shape` filled with 1", "none", false,
     InferSource, FillKernel, LowerRandom},
}));

}  // namespace
}  // namespace rng
}  // namespace meshrt
