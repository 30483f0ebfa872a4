// Plans and copy accounting of the fast einsum. Numerical agreement with the reference kernels is
// tested in cpu_kernels_test.cc.
#include "kernels/einsum.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace kernels {
namespace {

using ::testing::ElementsAre;

Shape S(const char* text) { return *Shape::Parse(text); }

EinsumPlan Plan(const char* a, const char* b, const char* c) {
  absl::StatusOr<EinsumPlan> p = PlanContraction(S(a), S(b), S(c));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : EinsumPlan();
}

bool NoCopies(const EinsumPlan& p) { return !p.copy_a && !p.copy_b && !p.copy_c; }

TEST(PlanContractionTest, AllFourTransposeCombinationsReadInPlace) {
  struct Case {
    const char* a;
    const char* b;
    bool trans_a, trans_b;
  };
  for (const Case& c :
       {Case{"m:4,k:3", "k:3,n:5", false, false}, Case{"k:3,m:4", "k:3,n:5", true, false},
        Case{"m:4,k:3", "n:5,k:3", false, true}, Case{"k:3,m:4", "n:5,k:3", true, true}}) {
    SCOPED_TRACE(std::string(c.a) + " x " + c.b);
    const EinsumPlan p = Plan(c.a, c.b, "m:4,n:5");
    EXPECT_TRUE(NoCopies(p));
    EXPECT_EQ(p.trans_a, c.trans_a);
    EXPECT_EQ(p.trans_b, c.trans_b);
    EXPECT_FALSE(p.swap);
    EXPECT_EQ(p.m_size, 4);
    EXPECT_EQ(p.k_size, 3);
    EXPECT_EQ(p.n_size, 5);
  }
}

TEST(PlanContractionTest, OutputStoredNByMSwapsOperands) {
  const EinsumPlan p = Plan("m:4,k:3", "k:3,n:5", "n:5,m:4");
  EXPECT_TRUE(NoCopies(p));
  EXPECT_TRUE(p.swap);
}

TEST(PlanContractionTest, BatchDimsAnywhereAreStridedNotCopied) {
  EinsumPlan p = Plan("b:2,m:4,k:3", "b:2,k:3,n:5", "b:2,m:4,n:5");
  EXPECT_TRUE(NoCopies(p));
  EXPECT_THAT(p.batch, ElementsAre("b"));
  EXPECT_EQ(p.batch_size, 2);
  p = Plan("m:4,b:2,k:3", "k:3,b:2,n:5", "m:4,b:2,n:5");
  EXPECT_TRUE(NoCopies(p));
  p = Plan("m:4,k:3,b:2", "b:2,k:3,n:5", "n:5,b:2,m:4");
  EXPECT_TRUE(p.copy_a);  // b innermost in A breaks A's rows
  EXPECT_FALSE(p.copy_b);
  EXPECT_FALSE(p.copy_c);
  EXPECT_TRUE(p.swap);
}

TEST(PlanContractionTest, GroupedDimsAndTheCheaperCopy) {
  // M = {m1, m2}: contiguous in A and C in the same order: one GEMM with M = 12.
  EinsumPlan p = Plan("m1:3,m2:4,k:2", "k:2,n:50", "m1:3,m2:4,n:50");
  EXPECT_TRUE(NoCopies(p));
  EXPECT_EQ(p.m_size, 12);
  // C wants [m2, m1]: copying A (24 elements) is cheaper than permuting C (600).
  p = Plan("m1:3,m2:4,k:2", "k:2,n:50", "m2:4,m1:3,n:50");
  EXPECT_TRUE(p.copy_a);
  EXPECT_FALSE(p.copy_c);
  EXPECT_THAT(p.m, ElementsAre("m2", "m1"));
  // Size-1 dims change no layout.
  p = Plan("m:4,one:1,k:3", "k:3,n:5", "n:5,one:1,m:4");
  EXPECT_TRUE(NoCopies(p));
}

TEST(PlanContractionTest, RejectsDimsToPresumOrBroadcast) {
  EXPECT_EQ(PlanContraction(S("m:4,s:2,k:3"), S("k:3,n:5"), S("m:4,n:5")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanContraction(S("m:4,k:3"), S("k:3,n:5"), S("m:4,x:2,n:5")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

Tensor Random(const char* shape, int seed) {
  Tensor t(DType::kFloat32, S(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng);
  return t;
}

EinsumStats RunStats(const char* a, const char* b, const char* out) {
  Tensor ta = Random(a, 1), tb = Random(b, 2);
  Tensor o(DType::kFloat32, S(out));
  EinsumStats stats;
  const Tensor* inputs[] = {&ta, &tb};
  EXPECT_TRUE(Einsum(inputs, &o, &stats).ok());
  return stats;
}

TEST(EinsumStatsTest, GemmOrderAllocatesNothing) {
  for (const char* a : {"m:64,k:32", "k:32,m:64"}) {
    for (const char* b : {"k:32,n:48", "n:48,k:32"}) {
      for (const char* out : {"m:64,n:48", "n:48,m:64"}) {
        SCOPED_TRACE(std::string(a) + " x " + b + " -> " + out);
        const EinsumStats s = RunStats(a, b, out);
        EXPECT_EQ(s.scratch_bytes, 0);
        EXPECT_EQ(s.permute_copies, 0);
        EXPECT_EQ(s.gemm_calls, 1);
      }
    }
  }
  EinsumStats s = RunStats("b:4,m:64,k:32", "b:4,k:32,n:48", "b:4,m:64,n:48");
  EXPECT_EQ(s.scratch_bytes, 0);
  EXPECT_EQ(s.gemm_calls, 4);
  s = RunStats("m:64,b:4,k:32", "k:32,b:4,n:48", "m:64,b:4,n:48");
  EXPECT_EQ(s.scratch_bytes, 0);
}

TEST(EinsumStatsTest, AllBatchDimsIsAnElementwiseProductWithoutGemms) {
  for (const char* b : {"a:8,c:16", "c:16,a:8"}) {
    SCOPED_TRACE(b);
    const Tensor ta = Random("a:8,c:16", 1), tb = Random(b, 2);
    Tensor o(DType::kFloat32, S("a:8,c:16"));
    EinsumStats stats;
    const Tensor* inputs[] = {&ta, &tb};
    ASSERT_TRUE(Einsum(inputs, &o, &stats).ok());
    EXPECT_EQ(stats.gemm_calls, 0);
    const bool transposed = std::string(b) == "c:16,a:8";
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 16; ++j) {
        const float y = tb.f32()[transposed ? j * 8 + i : i * 16 + j];
        EXPECT_FLOAT_EQ(o.f32()[i * 16 + j], ta.f32()[i * 16 + j] * y);
      }
    }
  }
}

TEST(EinsumStatsTest, CopiesOnlyWhatDoesNotFit) {
  // A's M dims in the wrong order for C: A (2*3*32 floats) is permuted, nothing else.
  EinsumStats s = RunStats("m1:2,m2:3,k:32", "k:32,n:48", "m2:3,m1:2,n:48");
  EXPECT_EQ(s.permute_copies, 1);
  EXPECT_EQ(s.scratch_bytes, 2 * 3 * 32 * 4);
  // A broadcast dim in the middle: the core result goes through scratch.
  s = RunStats("m:64,k:32", "k:32,n:48", "m:64,x:3,n:48");
  EXPECT_EQ(s.permute_copies, 1);
  EXPECT_EQ(s.scratch_bytes, 64 * 48 * 4);
  // Leading broadcast dims are computed in place and replicated.
  s = RunStats("m:64,k:32", "k:32,n:48", "x:3,m:64,n:48");
  EXPECT_EQ(s.scratch_bytes, 0);
  // A dim in one input only is summed out first.
  s = RunStats("m:64,s:5,k:32", "k:32,n:48", "m:64,n:48");
  EXPECT_EQ(s.presums, 1);
  EXPECT_EQ(s.scratch_bytes, 64 * 32 * 4);
}

TEST(EinsumTest, RejectsMismatchedSizesAndOtherDtypes) {
  Tensor a = Random("m:4,k:3", 1), b = Random("k:2,n:5", 2);
  Tensor out(DType::kFloat32, S("m:4,n:5"));
  const Tensor* inputs[] = {&a, &b};
  absl::Status s = Einsum(inputs, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("'k'"));
  Tensor ints(DType::kInt32, S("m:4,n:5"));
  const Tensor* good[] = {&a, &a};
  EXPECT_EQ(Einsum(good, &ints).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kernels
}  // namespace meshrt

namespace meshrt {
namespace kernels {
namespace {

// out + alpha * einsum(inputs), by Einsum and a plain loop.
Tensor Expected(std::vector<const Tensor*> inputs, const Tensor& out, float alpha) {
  Tensor product(DType::kFloat32, out.shape());
  EXPECT_TRUE(Einsum(inputs, &product).ok());
  Tensor want = out;
  for (int64_t i = 0; i < want.num_elements(); ++i) want.f32()[i] += alpha * product.f32()[i];
  return want;
}

TEST(EinsumAccumulateTest, GemmShapesAddInsideTheGemm) {
  struct Case {
    const char* a;
    const char* b;
    const char* out;
  };
  // Plain, transposed operands, C^T, batched, and an SGD-like weight update x^T . dy.
  for (const Case& c : {Case{"m:64,k:32", "k:32,n:48", "m:64,n:48"},
                        Case{"k:32,m:64", "n:48,k:32", "m:64,n:48"},
                        Case{"m:64,k:32", "k:32,n:48", "n:48,m:64"},
                        Case{"b:3,m:8,k:5", "b:3,k:5,n:7", "b:3,m:8,n:7"},
                        Case{"b:3,m:8,k:5", "b:3,k:5,n:7", "n:7,b:3,m:8"},  // strided C^T
                        Case{"batch:16,d_model:24", "batch:16,d_ff:40", "d_model:24,d_ff:40"},
                        Case{"a:8,c:16", "c:16,a:8", "a:8,c:16"}}) {
    SCOPED_TRACE(std::string(c.a) + " x " + c.b + " -> " + c.out);
    const Tensor ta = Random(c.a, 1), tb = Random(c.b, 2);
    Tensor out = Random(c.out, 3);
    const Tensor want = Expected({&ta, &tb}, out, -0.25f);
    EinsumStats stats;
    const Tensor* inputs[] = {&ta, &tb};
    ASSERT_TRUE(EinsumAccumulate(inputs, -0.25f, &out, &stats).ok());
    EXPECT_LE(MaxRelativeError(out, want), 1e-5);
    EXPECT_EQ(stats.accumulating_gemms, 1);
    EXPECT_EQ(stats.scratch_bytes, 0);
  }
}

TEST(EinsumAccumulateTest, OtherShapesGoThroughScratch) {
  struct Case {
    std::vector<const char*> in;
    const char* out;
  };
  // A dim to pre-sum, a broadcast dim, three inputs, one input.
  for (const Case& c : {Case{{"m:6,k:5,s:4", "k:5,n:7"}, "m:6,n:7"},
                        Case{{"m:6,k:5", "k:5,n:7"}, "r:2,m:6,n:7"},
                        Case{{"m:6,k:5", "k:5,j:4", "j:4,n:7"}, "m:6,n:7"},
                        Case{{"m:6,k:5"}, "m:6"}}) {
    SCOPED_TRACE(c.out);
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < c.in.size(); ++i) tensors.push_back(Random(c.in[i], 10 + i));
    std::vector<const Tensor*> inputs;
    for (const Tensor& t : tensors) inputs.push_back(&t);
    Tensor out = Random(c.out, 4);
    const Tensor want = Expected(inputs, out, 0.5f);
    EinsumStats stats;
    ASSERT_TRUE(EinsumAccumulate(inputs, 0.5f, &out, &stats).ok());
    EXPECT_LE(MaxRelativeError(out, want), 1e-5);
    EXPECT_EQ(stats.accumulating_gemms, 0);
    EXPECT_GT(stats.scratch_bytes, 0);
  }
}

TEST(EinsumAccumulateTest, RejectsWhatEinsumRejects) {
  const Tensor a = Random("m:4,k:3", 1), b = Random("k:5,n:2", 2);
  Tensor out = Random("m:4,n:2", 3);
  const Tensor* inputs[] = {&a, &b};
  const absl::Status s = EinsumAccumulate(inputs, 1.0f, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'k'"), std::string::npos) << s;
}

}  // namespace
}  // namespace kernels
}  // namespace meshrt
