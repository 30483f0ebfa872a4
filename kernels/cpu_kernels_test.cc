// Table-driven comparison of CpuKernels() with ReferenceKernels(): odd sizes, size-1 dims,
// transposed operands, batch dims in every position, dims summed out of one input, output-only
// dims, 3- and 4-input einsums, broadcasts in every direction, reductions over leading / middle /
// trailing / all dims. Each case runs both runners on the same random inputs.
#include "kernels/cpu_kernels.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ops/kernel_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

struct Case {
  std::string type;
  std::vector<std::string> inputs;  // shapes, e.g. "m:3,k:7"
  std::string out;
  double tolerance;  // MaxRelativeError bound
  DType dtype = DType::kFloat32;
};

std::string Name(const Case& c) {
  return absl::StrCat(c.type, "(", absl::StrJoin(c.inputs, " x "), ") -> [", c.out, "]",
                      c.dtype == DType::kInt32 ? " int32" : "");
}

Tensor Random(const std::string& shape, DType dtype, bool positive, std::mt19937* rng) {
  Tensor t(dtype, *Shape::Parse(shape));
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const float v = dist(*rng);
    if (dtype == DType::kInt32) {
      t.i32()[i] = static_cast<int32_t>(v * 20);
    } else {
      t.f32()[i] = positive ? 0.5f + std::abs(v) : v;  // divisors stay away from zero
    }
  }
  return t;
}

void ExpectSameAsReference(const Case& c) {
  SCOPED_TRACE(Name(c));
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(Name(c))));
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back(Random(c.inputs[i], c.dtype, c.type == "div" && i == 1, &rng));
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  v1::Op op;
  op.set_name("case");
  op.set_type(c.type);
  // `scalar` is scale's factor; on a binary op it would mean the scalar-operand form.
  if (c.type == "scale") (*op.mutable_attrs())["scalar"].set_f(-1.75f);
  const Shape out_shape = *Shape::Parse(c.out);
  Tensor want(c.dtype, out_shape), got(c.dtype, out_shape);
  // Poison the fast output so a kernel that skips elements cannot pass.
  if (c.dtype == DType::kFloat32) {
    for (int64_t i = 0; i < got.num_elements(); ++i) got.f32()[i] = 12345.0f;
  }
  ASSERT_TRUE(ReferenceKernels().Run(op, ptrs, &want).ok());
  const absl::Status s = CpuKernels().Run(op, ptrs, &got);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_LE(MaxRelativeError(got, want), c.tolerance);
}

constexpr double kGemmTol = 1e-4;
constexpr double kExact = 1e-6;

std::vector<Case> EinsumCases() {
  std::vector<Case> cases;
  for (int s : {1, 3, 7, 17, 33, 65}) {
    const std::string n = std::to_string(s);
    cases.push_back(
        {"einsum", {"m:" + n + ",k:" + n, "k:" + n + ",n:" + n}, "m:" + n + ",n:" + n, kGemmTol});
  }
  // Every transpose combination of A and B, and both output orders.
  for (const char* a : {"m:33,k:17", "k:17,m:33"}) {
    for (const char* b : {"k:17,n:65", "n:65,k:17"}) {
      for (const char* out : {"m:33,n:65", "n:65,m:33"})
        cases.push_back({"einsum", {a, b}, out, kGemmTol});
    }
  }
  const std::vector<Case> more = {
      {"einsum", {"m:17,k:33", "k:33,n:7"}, "m:17,n:7", kGemmTol},
      // Batch dims leading, in the middle, trailing, split, in different places per operand.
      {"einsum", {"b:3,m:17,k:33", "b:3,k:33,n:7"}, "b:3,m:17,n:7", kGemmTol},
      {"einsum", {"m:17,b:3,k:33", "k:33,b:3,n:7"}, "m:17,b:3,n:7", kGemmTol},
      {"einsum", {"m:17,k:33,b:3", "k:33,n:7,b:3"}, "m:17,n:7,b:3", kGemmTol},
      {"einsum", {"b:3,m:17,k:33", "k:33,n:7,b:3"}, "n:7,b:3,m:17", kGemmTol},
      {"einsum", {"b1:2,m:7,b2:3,k:17", "b2:3,k:17,b1:2,n:5"}, "b1:2,b2:3,m:7,n:5", kGemmTol},
      // Grouped M/K/N dims, matching and mismatching orders.
      {"einsum", {"b:3,m1:5,m2:3,k1:4,k2:7", "k1:4,k2:7,n:9,b:3"}, "b:3,m1:5,m2:3,n:9", kGemmTol},
      {"einsum", {"b:3,m1:5,m2:3,k1:4,k2:7", "k2:7,k1:4,n:9,b:3"}, "b:3,m2:3,m1:5,n:9", kGemmTol},
      {"einsum", {"m1:5,k:65,m2:3", "n2:2,k:65,n1:7"}, "n1:7,m2:3,n2:2,m1:5", kGemmTol},
      // Size-1 dims.
      {"einsum", {"m:1,k:7", "k:7,n:1"}, "m:1,n:1", kGemmTol},
      {"einsum", {"b:1,m:5,k:3", "b:1,k:3,n:4"}, "n:4,b:1,m:5", kGemmTol},
      {"einsum", {"m:65,one:1,k:33", "k:33,n:17"}, "n:17,m:65,one:1", kGemmTol},
      // Dims summed out of one input only.
      {"einsum", {"m:17,s:5,k:33", "k:33,n:7"}, "m:17,n:7", kGemmTol},
      {"einsum", {"m:17,k:33", "t:3,k:33,n:7"}, "n:7,m:17", kGemmTol},
      // Output-only dims: leading, middle, trailing.
      {"einsum", {"m:17,k:33", "k:33,n:7"}, "x:3,m:17,n:7", kGemmTol},
      {"einsum", {"m:17,k:33", "k:33,n:7"}, "m:17,x:3,n:7", kGemmTol},
      {"einsum", {"m:17,k:33", "k:33,n:7"}, "m:17,n:7,x:3", kGemmTol},
      // Degenerate GEMMs: outer product, dot product, Hadamard (batch only), scalar operand.
      {"einsum", {"m:7", "n:65"}, "m:7,n:65", kGemmTol},
      {"einsum", {"k:65", "k:65"}, "", kGemmTol},
      {"einsum", {"i:33,j:17", "j:17,i:33"}, "i:33,j:17", kGemmTol},
      {"einsum", {"", "k:5"}, "k:5", kGemmTol},
      // One input: transpose, reduce, broadcast.
      {"einsum", {"a:3,b:5,c:7"}, "c:7,a:3", kGemmTol},
      {"einsum", {"a:3,b:5,c:7"}, "", kGemmTol},
      {"einsum", {"a:3,b:5,c:7"}, "c:7,b:5,a:3,x:2", kGemmTol},
      {"einsum", {"a:33,b:65"}, "b:65,a:33", kExact},
      // Three and four inputs.
      {"einsum", {"a:5,b:7", "b:7,c:3", "c:3,d:9"}, "a:5,d:9", kGemmTol},
      {"einsum", {"bt:2,a:5,b:7", "bt:2,b:7,c:3", "c:3,d:9"}, "bt:2,a:5,d:9", kGemmTol},
      {"einsum", {"a:3,s:4", "a:3,b:5", "b:5,c:6"}, "x:2,c:6,a:3", kGemmTol},
      {"einsum", {"a:3,b:4", "b:4,c:5", "c:5,d:6", "d:6,e:7"}, "a:3,e:7", kGemmTol},
      {"einsum", {"i:5,j:3", "j:3,k:4", "k:4,i:5", "i:5"}, "j:3", kGemmTol},
      {"einsum", {"h:2,q:7,d:5", "h:2,t:7,d:5", "h:2,t:7,e:3", "e:3,o:4"}, "q:7,h:2,o:4", kGemmTol},
  };
  cases.insert(cases.end(), more.begin(), more.end());
  return cases;
}

std::vector<Case> ElementwiseCases() {
  std::vector<Case> cases;
  const std::vector<std::vector<std::string>> shapes = {
      {"a:17,b:33", "a:17,b:33", "a:17,b:33"},    // identical
      {"a:17,b:33", "b:33", "a:17,b:33"},         // broadcast along leading dim
      {"a:17,b:33", "a:17", "a:17,b:33"},         // broadcast along trailing dim
      {"b:33", "a:17,b:33", "a:17,b:33"},         // broadcast first operand
      {"", "a:7,b:9", "a:7,b:9"},                 // scalar
      {"a:7", "b:9", "a:7,b:9"},                  // both broadcast
      {"a:7,b:9", "b:9,a:7", "a:7,b:9"},          // transposed operand
      {"a:3,b:5,c:7", "c:7,a:3", "c:7,b:5,a:3"},  // output in a third order
      {"a:3,b:5,c:7", "a:3,c:7", "a:3,b:5,c:7"},  // broadcast along a middle dim
      {"a:1,b:65", "b:65", "a:1,b:65"},           // size-1 dims
  };
  for (const char* type : {"add", "sub", "mul", "div", "minimum", "maximum"}) {
    for (const auto& s : shapes) cases.push_back({type, {s[0], s[1]}, s[2], kExact});
  }
  for (const char* type : {"add", "sub", "mul", "minimum", "maximum"}) {
    cases.push_back({type, {"a:7,b:9", "b:9"}, "a:7,b:9", 0, DType::kInt32});
  }
  for (const char* type : {"relu", "exp", "neg", "scale"}) {
    cases.push_back({type, {"a:17,b:33"}, "a:17,b:33", kExact});
    cases.push_back({type, {"a:17,b:33"}, "b:33,a:17", kExact});
    cases.push_back({type, {"a:3,b:1,c:65"}, "c:65,a:3,b:1", kExact});
  }
  return cases;
}

std::vector<Case> ReduceCases() {
  std::vector<Case> cases;
  const std::vector<std::pair<std::string, std::string>> shapes = {
      {"a:7,b:17,c:33", "b:17,c:33"},      // leading
      {"a:7,b:17,c:33", "a:7,c:33"},       // middle
      {"a:7,b:17,c:33", "a:7,b:17"},       // trailing
      {"a:7,b:17,c:33", ""},               // all
      {"a:7,b:17,c:33", "b:17"},           // all but the middle
      {"a:7,b:17,c:33", "c:33,a:7"},       // transposed output
      {"a:7,b:17,c:33", "c:33,b:17,a:7"},  // nothing reduced, permuted
      {"a:1,b:65", "a:1"},                 // size-1 dims
      {"a:3,b:65,c:1", "c:1,a:3"},
  };
  for (const char* type : {"reduce_sum", "reduce_max", "reduce_mean"}) {
    for (const auto& s : shapes) cases.push_back({type, {s.first}, s.second, 1e-5});
  }
  cases.push_back({"reduce_sum", {"a:7,b:17"}, "b:17", 0, DType::kInt32});
  return cases;
}

TEST(CpuKernelsTest, EinsumMatchesReference) {
  for (const Case& c : EinsumCases()) ExpectSameAsReference(c);
}

TEST(CpuKernelsTest, ElementwiseMatchesReference) {
  for (const Case& c : ElementwiseCases()) ExpectSameAsReference(c);
}

TEST(CpuKernelsTest, ReductionsMatchReference) {
  for (const Case& c : ReduceCases()) ExpectSameAsReference(c);
}

// Random einsums: 1-4 inputs, up to 6 dims of sizes 1-7, each dim in a random subset of the
// inputs and output (so some are batch, contracted, free, summed out of one input, or output-only),
// every tensor's dims in a random order.
TEST(CpuKernelsTest, RandomEinsumsMatchReference) {
  std::mt19937 rng(20240601);
  const int64_t sizes[] = {1, 2, 3, 4, 5, 7};
  for (int trial = 0; trial < 300; ++trial) {
    const int num_inputs = 1 + static_cast<int>(rng() % 4);
    const int num_dims = 1 + static_cast<int>(rng() % 6);
    std::vector<std::vector<std::string>> dims(num_inputs + 1);  // last = output
    for (int d = 0; d < num_dims; ++d) {
      const std::string dim = absl::StrCat("d", d, ":", sizes[rng() % 6]);
      const uint32_t mask = 1 + rng() % ((1u << (num_inputs + 1)) - 1);
      for (int t = 0; t <= num_inputs; ++t) {
        if (mask & (1u << t)) dims[t].push_back(dim);
      }
    }
    Case c{"einsum", {}, "", kGemmTol};
    for (int t = 0; t <= num_inputs; ++t) {
      std::shuffle(dims[t].begin(), dims[t].end(), rng);
      (t < num_inputs ? c.inputs.emplace_back() : c.out) = absl::StrJoin(dims[t], ",");
    }
    ExpectSameAsReference(c);
    if (::testing::Test::HasFailure()) break;
  }
}

// Random broadcasts and reductions: random subsets of up to 5 dims, each tensor in a random order.
TEST(CpuKernelsTest, RandomBroadcastsAndReductionsMatchReference) {
  std::mt19937 rng(7);
  const int64_t sizes[] = {1, 2, 3, 5, 17};
  const char* binary[] = {"add", "sub", "mul", "div", "minimum", "maximum"};
  const char* reduce[] = {"reduce_sum", "reduce_max", "reduce_mean"};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> all, a, b, kept;
    const int num_dims = 1 + static_cast<int>(rng() % 5);
    for (int d = 0; d < num_dims; ++d) {
      all.push_back(absl::StrCat("d", d, ":", sizes[rng() % 5]));
      if (rng() % 2) a.push_back(all.back());
      if (rng() % 2) b.push_back(all.back());
      if (rng() % 2) kept.push_back(all.back());
    }
    for (auto* v : {&all, &a, &b, &kept}) std::shuffle(v->begin(), v->end(), rng);
    ExpectSameAsReference({binary[trial % 6],
                           {absl::StrJoin(a, ","), absl::StrJoin(b, ",")},
                           absl::StrJoin(all, ","),
                           kExact});
    ExpectSameAsReference(
        {reduce[trial % 3], {absl::StrJoin(all, ",")}, absl::StrJoin(kept, ","), 1e-5});
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(CpuKernelsTest, CopyOpsFallBackToReference) {
  ExpectSameAsReference({"reshape", {"a:3,b:5"}, "c:15", 0});
  ExpectSameAsReference({"rename_dim", {"a:3,b:5"}, "a:3,z:5", 0});
}

TEST(CpuKernelsTest, ErrorsMatchReferenceCodesAndNameTheOp) {
  Tensor a(DType::kFloat32, *Shape::Parse("m:4,k:3"));
  Tensor b(DType::kFloat32, *Shape::Parse("k:2,n:5"));
  Tensor out(DType::kFloat32, *Shape::Parse("m:4,n:5"));
  v1::Op op;
  op.set_name("bad_matmul");
  op.set_type("einsum");
  absl::Status s = CpuKernels().Run(op, {&a, &b}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("bad_matmul"));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("'k'"));
  op.set_type("add");
  EXPECT_EQ(CpuKernels().Run(op, {&a, &b}, &out).code(), absl::StatusCode::kInvalidArgument);
  op.set_type("reduce_sum");
  EXPECT_EQ(CpuKernels().Run(op, {&a}, &out).code(), absl::StatusCode::kInvalidArgument);
  op.set_type("fft");
  s = CpuKernels().Run(op, {&a}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("fft"));
}

}  // namespace
}  // namespace meshrt
