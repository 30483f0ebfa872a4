#include "kernels/blas.h"

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace kernels {
namespace {

using ::testing::HasSubstr;

CpuFeatures Avx512() {
  CpuFeatures f;
  f.avx512f = f.avx512dq = f.avx512bw = f.avx512vl = f.avx2 = f.fma = true;
  return f;
}

CpuFeatures AmdAvx512() {
  CpuFeatures f = Avx512();
  f.amd = true;
  return f;
}

CpuFeatures Avx2() {
  CpuFeatures f;
  f.avx2 = f.fma = true;
  return f;
}

struct CoretypeCase {
  const char* meshrt;
  const char* openblas;
  CpuFeatures cpu;
  std::optional<std::string> want;
  const char* reason_part;
};

TEST(ChooseCoretypeTest, FollowsTheDocumentedRules) {
  const CoretypeCase cases[] = {
      {nullptr, nullptr, Avx512(), "SkylakeX", "CPU has AVX-512"},
      {nullptr, nullptr, Avx2(), "Haswell", "AVX2+FMA"},
      {nullptr, nullptr, AmdAvx512(), "Haswell", "AMD CPU with AVX2+FMA"},
      {"SkylakeX", nullptr, AmdAvx512(), "SkylakeX", "MESHRT_BLAS_CORETYPE=SkylakeX"},
      {nullptr, nullptr, CpuFeatures(), std::nullopt, "OpenBLAS's own detection"},
      {nullptr, "Zen", Avx512(), std::nullopt, "OPENBLAS_CORETYPE=Zen set by the user"},
      {"", "", Avx512(), "SkylakeX", "CPU has AVX-512"},
      {"auto", "Prescott", Avx512(), "SkylakeX", "chosen by meshrt"},
      {"default", nullptr, Avx512(), std::nullopt, "MESHRT_BLAS_CORETYPE=default"},
      {"default", "Zen", Avx512(), std::nullopt, "OPENBLAS_CORETYPE=Zen"},
      {"Haswell", "SkylakeX", Avx512(), "Haswell", "MESHRT_BLAS_CORETYPE=Haswell"},
  };
  for (const CoretypeCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "meshrt=" << (c.meshrt ? c.meshrt : "(unset)")
                                      << " openblas=" << (c.openblas ? c.openblas : "(unset)"));
    const CoretypeChoice got = ChooseCoretype(c.meshrt, c.openblas, c.cpu);
    EXPECT_EQ(got.set_coretype, c.want);
    EXPECT_THAT(got.reason, HasSubstr(c.reason_part));
  }
  // Partial AVX-512 (no BW/VL) is not enough for SkylakeX.
  CpuFeatures partial = Avx2();
  partial.avx512f = true;
  EXPECT_EQ(ChooseCoretype(nullptr, nullptr, partial).set_coretype, "Haswell");
}

TEST(GetBlasTest, LoadsAFastCoreOnThisCpu) {
  const Blas& blas = GetBlas();
  ASSERT_TRUE(blas.status().ok()) << blas.status();
  EXPECT_THAT(blas.config(), HasSubstr("OpenBLAS"));
  EXPECT_EQ(blas.threads(), 1);
  EXPECT_NE(blas.raw_sgemm(), nullptr);
  const CpuFeatures cpu = CpuFeatures::Detect();
  if (cpu.HasAvx512() || (cpu.avx2 && cpu.fma)) {
    EXPECT_NE(blas.corename(), "Prescott") << "the slow-kernel trap: see PLATFORM.md";
    EXPECT_EQ(blas.corename(), cpu.amd || !cpu.HasAvx512() ? "Haswell" : "SkylakeX");
  }
}

// C = op(A) op(B) through `blas` against a double-precision triple loop.
void ExpectGemmMatches(const Blas& blas, bool ta, bool tb) {
  const int64_t m = 17, n = 33, k = 7;
  std::mt19937 rng(ta * 2 + tb);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(m * k), b(k * n), c(m * n, 99.0f);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  blas.Sgemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) {
        want +=
            double(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      }
      ASSERT_NEAR(c[i * n + j], want, 1e-5)
          << "ta=" << ta << " tb=" << tb << " at " << i << "," << j;
    }
  }
}

TEST(BlasTest, SgemmAllTransposeCombinations) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) ExpectGemmMatches(GetBlas(), ta, tb);
  }
}

TEST(BlasTest, MissingLibraryFallsBackToTheLoop) {
  BlasOptions options;
  options.libraries = {"libmeshrt-no-such-blas.so"};
  options.choose_coretype = false;
  const Blas blas(options);
  EXPECT_EQ(blas.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(blas.status().message()), HasSubstr("libmeshrt-no-such-blas.so"));
  EXPECT_EQ(blas.corename(), "none");
  EXPECT_EQ(blas.raw_sgemm(), nullptr);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) ExpectGemmMatches(blas, ta, tb);
  }
}

}  // namespace
}  // namespace kernels
}  // namespace meshrt
