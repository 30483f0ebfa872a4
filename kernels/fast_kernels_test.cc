// The fast-kernel table (fast_kernels.h): every type in it is a registered op (or one of the
// executor's fused '_' ops), every one runs through the fast path on a float32 sample, CpuKernels()
// gives that path's bits, and ops or forms without a fast kernel fall back to the reference.
#include "kernels/fast_kernels.h"

#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/ops/kernel_runner.h"
#include "core/ops/ops.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"

namespace meshrt {
namespace {

// One float32 sample op: its inputs' shapes and its output shape; `dims` and `attrs` as given.
struct Sample {
  std::vector<std::string> inputs;
  std::string out;
  std::vector<std::string> dims;
  std::map<std::string, float> float_attrs;
};

const char kAB[] = "a:3,b:4";

// A sample for every type the table holds (the test fails for a type without one).
std::map<std::string, Sample> Samples() {
  std::map<std::string, Sample> s;
  s["einsum"] = {{"m:3,k:4", "k:4,n:5"}, "m:3,n:5"};
  for (const char* t : {"add", "sub", "mul", "div", "minimum", "maximum", "pow", "equal", "less",
                        "greater", "logical_and", "logical_or"}) {
    s[t] = {{kAB, kAB}, kAB};
  }
  s["where"] = {{kAB, kAB, kAB}, kAB};
  for (const char* t : {"relu", "exp", "neg", "log", "sqrt", "rsqrt", "square", "tanh", "sigmoid",
                        "gelu", "abs", "sign", "reciprocal"}) {
    s[t] = {{kAB}, kAB};
  }
  s["scale"] = {{kAB}, kAB, {}, {{"scalar", -1.75f}}};
  for (const char* t : {"reduce_sum", "reduce_max", "reduce_mean", "reduce_min", "reduce_any",
                        "reduce_all", "reduce_logsumexp"}) {
    s[t] = {{kAB}, "a:3", {"b"}};
  }
  s["softmax"] = s["log_softmax"] = {{kAB}, kAB, {"b"}};
  s["_add_softmax"] = s["_add_log_softmax"] = s["softmax_grad"] = {{kAB, kAB}, kAB, {"b"}};
  s["_scaled_einsum_add"] = {{"m:3,n:5", "", "m:3,k:4", "k:4,n:5"}, "m:3,n:5", {}, {{"sign", -1}}};
  s["_scaled_add"] = {{kAB, kAB, ""}, kAB, {}, {{"sign", -1}}};
  s["_masked_mul"] = {{kAB, kAB}, kAB, {}, {{"scalar", 1.0f}}};
  s["layer_norm"] = {{kAB, "b:4", "b:4"}, kAB, {"b"}};
  s["rms_norm"] = {{kAB, "b:4"}, kAB, {"b"}};
  s["layer_norm_grad"] = s["rms_norm_grad"] = {{kAB, "b:4", kAB}, kAB, {"b"}};
  s["softmax_cross_entropy"] = {{kAB, kAB}, "a:3", {"b"}};
  return s;
}

v1::Op MakeOp(const std::string& type, const Sample& sample) {
  v1::Op op;
  op.set_name("sample");
  op.set_type(type);
  for (const std::string& d : sample.dims) op.add_dims(d);
  for (const auto& [k, v] : sample.float_attrs) (*op.mutable_attrs())[k].set_f(v);
  return op;
}

// Values in [0.5, 1.5): positive, so log, sqrt, pow and div are defined.
std::vector<Tensor> Inputs(const Sample& sample, std::mt19937* rng) {
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  std::vector<Tensor> inputs;
  for (const std::string& shape : sample.inputs) {
    Tensor t(DType::kFloat32, *Shape::Parse(shape));
    for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(*rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::vector<const Tensor*> Pointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : tensors) p.push_back(&t);
  return p;
}

TEST(FastKernelsTest, EveryTableTypeIsARegisteredOpOrAnExecutorFusion) {
  const std::vector<std::string> types = FastKernelTypes();
  ASSERT_FALSE(types.empty());
  for (const std::string& type : types) {
    if (type[0] == '_') {
      EXPECT_EQ(FindOp(type), nullptr) << type << ": '_' types are the executor's, not ops";
    } else {
      EXPECT_NE(FindOp(type), nullptr) << type << " has a fast kernel but is not a registered op";
    }
    EXPECT_NE(FindFastKernel(type), nullptr) << type;
  }
  EXPECT_EQ(std::set<std::string>(types.begin(), types.end()).size(), types.size());
}

TEST(FastKernelsTest, TableOpsRunThroughTheFastPath) {
  const std::map<std::string, Sample> samples = Samples();
  std::mt19937 rng(7);
  for (const std::string& type : FastKernelTypes()) {
    SCOPED_TRACE(type);
    auto it = samples.find(type);
    // A one-input elementwise op (a record's own fast kernel, core/ops/ops_math.h FastUnary)
    // needs no sample of its own.
    const OpInfo* info = FindOp(type);
    const bool unary = info != nullptr && info->family == OpFamily::kElementwise &&
                       info->min_inputs == 1 && info->max_inputs == 1;
    ASSERT_TRUE(it != samples.end() || unary) << "no sample for fast kernel " << type;
    const Sample sample = it != samples.end() ? it->second : Sample{{kAB}, kAB};
    const v1::Op op = MakeOp(type, sample);
    const std::vector<Tensor> inputs = Inputs(sample, &rng);
    const Shape out_shape = *Shape::Parse(sample.out);
    Tensor fast(DType::kFloat32, out_shape), cpu(DType::kFloat32, out_shape);
    const std::optional<absl::Status> s = RunFastKernel(op, Pointers(inputs), &fast);
    ASSERT_TRUE(s.has_value()) << "fell back to the reference kernel";
    ASSERT_TRUE(s->ok()) << *s;
    // CpuKernels() takes that path: the same bits (the kernels are deterministic).
    ASSERT_TRUE(CpuKernels().Run(op, Pointers(inputs), &cpu).ok());
    EXPECT_EQ(std::memcmp(fast.f32(), cpu.f32(), sizeof(float) * fast.num_elements()), 0);
    // And the fast kernel computes the op (against the reference, loosely: FastExp, BLAS).
    if (type[0] != '_') {
      Tensor want(DType::kFloat32, out_shape);
      ASSERT_TRUE(ReferenceKernels().Run(op, Pointers(inputs), &want).ok());
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        EXPECT_NEAR(fast.f32()[i], want.f32()[i], 1e-4 * (1 + std::abs(want.f32()[i]))) << i;
      }
    }
  }
}

TEST(FastKernelsTest, OtherOpsAndFormsFallBackToTheReference) {
  std::mt19937 rng(11);
  const Sample unary{{kAB}, kAB};
  const std::vector<Tensor> inputs = Inputs(unary, &rng);
  Tensor out(DType::kFloat32, *Shape::Parse(kAB));
  // No record: an op the table does not list.
  EXPECT_EQ(FindFastKernel("cumsum"), nullptr);
  EXPECT_EQ(FindFastKernel("no_such_op"), nullptr);
  EXPECT_FALSE(RunFastKernel(MakeOp("cumsum", unary), Pointers(inputs), &out).has_value());
  // A form the fast kernel does not take: scale without its scalar, a unary op with two inputs.
  EXPECT_FALSE(RunFastKernel(MakeOp("scale", unary), Pointers(inputs), &out).has_value());
  const Sample two{{kAB, kAB}, kAB};
  const std::vector<Tensor> pair = Inputs(two, &rng);
  EXPECT_FALSE(RunFastKernel(MakeOp("exp", two), Pointers(pair), &out).has_value());
  // int32 tensors.
  Tensor ints(DType::kInt32, *Shape::Parse(kAB)), int_out(DType::kInt32, *Shape::Parse(kAB));
  EXPECT_FALSE(RunFastKernel(MakeOp("add", two), {&ints, &ints}, &int_out).has_value());
  EXPECT_FALSE(RunFastKernel(MakeOp("add", two), {&ints, &ints}, &out).has_value());
}

}  // namespace
}  // namespace meshrt
