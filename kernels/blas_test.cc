#include "kernels/blas.h"

#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/blas_probe.h"

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
      {nullptr, nullptr, AmdAvx512(), "SkylakeX", "CPU has AVX-512"},  // never by vendor
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
    // No core forced: the fastest correct one this machine measured (never a vendor rule).
    const char* forced = std::getenv("MESHRT_BLAS_CORETYPE");
    if ((forced == nullptr || std::string(forced) == "auto") &&
        std::getenv("OPENBLAS_CORETYPE") == nullptr) {
      absl::StatusOr<MeasuredCores> measured =
          MeasuredCoresFor("libopenblas.so.0", cpu, /*measure=*/false);
      ASSERT_TRUE(measured.ok()) << measured.status();
      ASSERT_NE(FastestCorrect(measured->cores), nullptr);
      EXPECT_EQ(blas.corename(), FastestCorrect(measured->cores)->requested);
      EXPECT_THAT(blas.reason(), HasSubstr("chosen by measurement"));
    }
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

TEST(BlasProbeTest, EveryCandidateCoreOfThisCpuIsMeasuredAndCheckedInAChild) {
  const CpuFeatures cpu = CpuFeatures::Detect();
  const std::vector<std::string> candidates = CandidateCores(cpu);
  if (candidates.empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
  const std::vector<CoreMeasurement> measured = MeasureCores("libopenblas.so.0", candidates);
  ASSERT_EQ(measured.size(), candidates.size());
  for (const CoreMeasurement& m : measured) {
    SCOPED_TRACE(m.requested);
    EXPECT_EQ(m.error, "");
    EXPECT_TRUE(m.correct);
    EXPECT_EQ(m.corename, m.requested);  // OpenBLAS ran the core asked for
    EXPECT_GT(m.gflops, 1.0);
  }
  const CoreMeasurement* best = FastestCorrect(measured);
  ASSERT_NE(best, nullptr);
  for (const CoreMeasurement& m : measured) EXPECT_GE(best->gflops, m.gflops);
  EXPECT_THAT(DescribeMeasurements(measured), HasSubstr(best->requested));
}

TEST(BlasProbeTest, AChildThatCannotRunIsAnErrorNotAChoice) {
  const std::vector<CoreMeasurement> measured = MeasureCores("libnosuchblas.so", {"Haswell"});
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_FALSE(measured[0].correct);
  EXPECT_THAT(measured[0].error, HasSubstr("cannot load libnosuchblas.so"));
  EXPECT_EQ(FastestCorrect(measured), nullptr);
}

TEST(BlasProbeTest, FastestCorrectIgnoresWrongAndFailedCores) {
  std::vector<CoreMeasurement> m(3);
  m[0] = {"Haswell", "Haswell", true, 100, ""};
  m[1] = {"SkylakeX", "SkylakeX", false, 300, "wrong results (relative error 0.1)"};
  m[2] = {"Zen", "", false, 0, "the probe died of signal 4 (an instruction this CPU lacks)"};
  ASSERT_NE(FastestCorrect(m), nullptr);
  EXPECT_EQ(FastestCorrect(m)->requested, "Haswell");
  EXPECT_THAT(DescribeMeasurements(m), HasSubstr("SkylakeX (wrong results"));
}

TEST(BlasProbeTest, MeasurementsAreCachedPerMachine) {
  const CpuFeatures cpu = CpuFeatures::Detect();
  if (CandidateCores(cpu).empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
  char dir[] = "/tmp/meshrt-blas-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  setenv("MESHRT_BLAS_CACHE_DIR", dir, 1);
  EXPECT_EQ(MeasuredCoresFor("libopenblas.so.0", cpu, /*measure=*/false).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<MeasuredCores> first = MeasuredCoresFor("libopenblas.so.0", cpu, true);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->from_cache);
  EXPECT_THAT(first->cache_file, HasSubstr(dir));
  absl::StatusOr<MeasuredCores> again = MeasuredCoresFor("libopenblas.so.0", cpu, false);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->from_cache);
  ASSERT_EQ(again->cores.size(), first->cores.size());
  EXPECT_EQ(FastestCorrect(again->cores)->requested, FastestCorrect(first->cores)->requested);
  unsetenv("MESHRT_BLAS_CACHE_DIR");
}

}  // namespace
}  // namespace kernels
}  // namespace meshrt
