// The reductions of the math family: shape inference, reference kernels, registration.
// Conventions are in core/ops/ops_math.h. Each record names its lowering: all but reduce_logsumexp
// LowerReduce<op> (lower_reduce.cc: local reduce, then allreduce with that op); reduce_logsumexp
// LowerLogSumExp (lower_math.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "core/ops/op_cost.h"
#include "core/ops/ops_math.h"
#include "util/status_macros.h"

namespace meshrt {
namespace math {
namespace {

bool FloatOnly(const std::string& t) { return t == "reduce_mean" || t == "reduce_logsumexp"; }
bool IsPredicate(const std::string& t) { return t == "reduce_any" || t == "reduce_all"; }

absl::StatusOr<TensorType> InferReduce(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(std::set<std::string> dims, ReducedDims(op, in[0].shape, /*need_one=*/false));
  if (FloatOnly(op.type()) && in[0].dtype != DType::kFloat32) {
    return OpError(op, absl::StrCat("input '", op.inputs(0), "' is ", DTypeName(in[0].dtype), "; ",
                                    op.type(), " needs float32 (cast it first)"));
  }
  return TensorType{Without(in[0].shape, dims),
                    IsPredicate(op.type()) ? DType::kFloat32 : in[0].dtype};
}

// One output element from the values of its reduced elements, in double.
template <typename T>
double ReduceRow(const std::string& t, const T* p, int64_t base,
                 const std::vector<int64_t>& inner) {
  if (t == "reduce_sum" || t == "reduce_mean") {
    double acc = 0;
    for (int64_t i : inner) acc += p[base + i];
    return t == "reduce_sum" ? acc : acc / static_cast<double>(inner.size());
  }
  if (t == "reduce_any" || t == "reduce_all") {
    const bool any = t == "reduce_any";
    bool acc = !any;
    for (int64_t i : inner) acc = any ? (acc || p[base + i] != T(0)) : (acc && p[base + i] != T(0));
    return acc ? 1.0 : 0.0;
  }
  const double inf = std::numeric_limits<double>::infinity();
  double m = t == "reduce_min" ? inf : -inf;
  for (int64_t i : inner) {
    const double v = p[base + i];
    m = t == "reduce_min" ? std::min(m, v) : std::max(m, v);
  }
  if (t != "reduce_logsumexp") return m;
  double s = 0;
  for (int64_t i : inner) s += std::exp(p[base + i] - m);
  return std::log(s) + m;  // an all -inf row gives NaN, as the distributed form does
}

template <typename T, typename U>
void ReduceLoop(const std::string& t, const Tensor& in, const Shape& kept, const Shape& reduced,
                Tensor* out) {
  const std::vector<int64_t> outer = Offsets(in.shape(), kept);
  const std::vector<int64_t> inner = Offsets(in.shape(), reduced);
  const T* p = DataOf<T>(in);
  U* o = MutableDataOf<U>(out);
  for (size_t k = 0; k < outer.size(); ++k) {
    o[k] = static_cast<U>(ReduceRow<T>(t, p, outer[k], inner));
  }
}

absl::Status ReduceKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out) {
  RETURN_IF_ERROR(CheckInputs(inputs, 1, 1));
  const Tensor& in = *inputs[0];
  const std::string& t = op.type();
  Shape kept, reduced;
  RETURN_IF_ERROR(SplitReduce(in.shape(), out->shape(), &kept, &reduced));
  if (FloatOnly(t)) RETURN_IF_ERROR(CheckFloat(in, "the input"));
  const DType want = IsPredicate(t) ? DType::kFloat32 : in.dtype();
  if (out->dtype() != want) {
    return absl::InvalidArgumentError(absl::StrCat("the output is ", DTypeName(out->dtype()),
                                                   " but should be ", DTypeName(want)));
  }
  const bool in_f = in.dtype() == DType::kFloat32;
  if (out->dtype() == DType::kFloat32) {
    in_f ? ReduceLoop<float, float>(t, in, kept, reduced, out)
         : ReduceLoop<int32_t, float>(t, in, kept, reduced, out);
  } else {
    ReduceLoop<int32_t, int32_t>(t, in, kept, reduced, out);
  }
  return absl::OkStatus();
}

// The lowering hook of a reduction combining across processors with kAcross.
template <v1::ReduceOp kAcross, bool kMean = false>
absl::StatusOr<LaidOutTensor> LowerReduce(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs) {
  return LowerReduction(ctx, op, inputs, kAcross, kMean);
}

OpInfo Reduction(const char* type, bool differentiable, const char* summary,
                 const char* collectives, LowerFn lower) {
  OpInfo info{
      type,       OpFamily::kReduce, 1,
      1,          differentiable,    absl::StrCat(summary, " over `dims` (none listed: every dim)"),
      collectives};
  info.infer = InferReduce;
  info.reference = ReduceKernel;
  info.lower = lower;
  return info;
}

std::vector<OpInfo> ReduceOps() {
  std::vector<OpInfo> ops = {
      Reduction("reduce_sum", true, "sum",
                "allreduce(sum) over the mesh dims of split reduced dims",
                &LowerReduce<v1::REDUCE_SUM>),
      Reduction("reduce_mean", true, "mean",
                "allreduce(sum) over the mesh dims of split reduced dims, then a local 1/count",
                &LowerReduce<v1::REDUCE_SUM, /*kMean=*/true>),
      Reduction("reduce_max", true, "max",
                "allreduce(max) over the mesh dims of split reduced dims",
                &LowerReduce<v1::REDUCE_MAX>),
      Reduction("reduce_min", true, "min",
                "allreduce(min) over the mesh dims of split reduced dims",
                &LowerReduce<v1::REDUCE_MIN>),
      Reduction("reduce_any", false, "float32 1 if any element != 0, else 0",
                "allreduce(max) over the mesh dims of split reduced dims",
                &LowerReduce<v1::REDUCE_MAX>),
      Reduction("reduce_all", false, "float32 1 if every element != 0, else 0",
                "allreduce(min) over the mesh dims of split reduced dims",
                &LowerReduce<v1::REDUCE_MIN>),
      Reduction("reduce_logsumexp", true, "log(sum(exp(x))), stably",
                "allreduce(max) then allreduce(sum) over the mesh dims of split reduced dims",
                &LowerLogSumExp),
  };
  ops[0].linear = ops[1].linear = &LinearInItsInput;  // reduce_sum, reduce_mean: sums of sums
  ops.back().cost = &PerInputElementCost<kSoftmaxFlops>;  // max, subtract, exp, sum per element
  return ops;
}

const bool kRegistered = RegisterOps(ReduceOps());

}  // namespace
}  // namespace math
}  // namespace meshrt
