#include "client/calibrate.h"

#include <string>

#include "absl/strings/match.h"
#include "core/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// Every calibration graph lowers to exactly the work it is meant to measure, on meshes of 2 and
// 4 workers: the collective kinds one collective of that kind (and the bytes it sends grow with
// the size), the others none.
TEST(CalibrateTest, EachGraphLowersToTheOneThingItMeasures) {
  for (int workers : {2, 4}) {
    SCOPED_TRACE(workers);
    for (const char* kind : {"overhead", "gemm", "small_gemm", "memory"}) {
      SCOPED_TRACE(kind);
      ASSERT_OK_AND_ASSIGN(CalibrationGraph g, MakeCalibrationGraph(kind, 0, workers));
      ASSERT_OK_AND_ASSIGN(int64_t sent, CheckCalibrationProgram(kind, g, workers));
      EXPECT_EQ(sent, 0);
    }
    for (const char* kind : {"allreduce", "allgather", "alltoall"}) {
      SCOPED_TRACE(kind);
      ASSERT_OK_AND_ASSIGN(CalibrationGraph small, MakeCalibrationGraph(kind, 0, workers));
      ASSERT_OK_AND_ASSIGN(CalibrationGraph large, MakeCalibrationGraph(kind, 1, workers));
      ASSERT_OK_AND_ASSIGN(int64_t small_sent, CheckCalibrationProgram(kind, small, workers));
      ASSERT_OK_AND_ASSIGN(int64_t large_sent, CheckCalibrationProgram(kind, large, workers));
      EXPECT_GT(small_sent, 0);
      EXPECT_EQ(large_sent, 16 * small_sent);  // 16 MiB against 1 MiB of payload
    }
  }
  // The per-worker work is the same whatever the worker count (weak scaling).
  ASSERT_OK_AND_ASSIGN(CalibrationGraph gemm, MakeCalibrationGraph("gemm", 0, 4));
  EXPECT_DOUBLE_EQ(gemm.flops, 2.0 * 512 * 1024 * 1024);
}

TEST(CalibrateTest, AGraphThatMeasuresSomethingElseIsCaught) {
  ASSERT_OK_AND_ASSIGN(CalibrationGraph g, MakeCalibrationGraph("allgather", 0, 2));
  EXPECT_TRUE(StatusIs(CheckCalibrationProgram("alltoall", g, 2).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"'alltoall' calibration graph", "(allgather)", "instead of one alltoall"}));
  EXPECT_TRUE(StatusIs(MakeCalibrationGraph("gemv", 0, 2).status(),
                       absl::StatusCode::kInvalidArgument, {"'gemv'"}));
}

TEST(CalibrateTest, TheProfileIsKeyValueLines) {
  Calibration c;
  c.workers = 2;
  c.step_overhead_seconds = 0.0012;
  c.gemm_flops_per_second = 9.5e10;
  c.comm["allreduce"] = CommFit{3e-4, 2.5e9};
  const std::string text = FormatCalibration(c, "test");
  EXPECT_TRUE(absl::StrContains(text, "# meshrt calibration profile: test\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nstep_overhead_s 0.0012\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\ngemm_flops_per_s 9.5e+10\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nallreduce_alpha_s 0.0003\nallreduce_beta_bytes_per_s 2.5e+09\n"))
      << text;
}

}  // namespace
}  // namespace meshrt
