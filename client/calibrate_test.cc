#include "client/calibrate.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/ir/mesh.h"
#include "core/lowering/lowering.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// Every calibration graph lowers to exactly the work it is meant to measure, on meshes of 2 and
// 4 workers: the collective kinds one collective of that kind (and the bytes it sends grow with
// the size), the others none.
TEST(CalibrateTest, EachGraphLowersToTheOneThingItMeasures) {
  for (int workers : {2, 4}) {
    SCOPED_TRACE(workers);
    for (const char* kind : {"overhead", "gemm", "small_gemm", "memory", "elementwise"}) {
      for (int size : {0, 1}) {
        SCOPED_TRACE(absl::StrCat(kind, " size ", size));
        ASSERT_OK_AND_ASSIGN(CalibrationGraph g, MakeCalibrationGraph(kind, size, workers));
        ASSERT_OK_AND_ASSIGN(int64_t sent, CheckCalibrationProgram(kind, g, workers));
        EXPECT_EQ(sent, 0);
      }
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
  ASSERT_OK_AND_ASSIGN(CalibrationGraph softmax, MakeCalibrationGraph("elementwise", 0, 4));
  EXPECT_DOUBLE_EQ(softmax.flops, 16.0 * 2048 * 1024);  // kSoftmaxFlops per element
}

// The compute graphs' long form chains 5 of the measured op, each reading the last one's result
// (so the rate is the 4 extra ops' work over the time they add), with 5 times the work.
TEST(CalibrateTest, ComputeGraphsChainFiveOpsInTheirLongForm) {
  const std::map<std::string, std::string> op_type = {
      {"gemm", "einsum"}, {"small_gemm", "einsum"}, {"memory", "neg"}, {"elementwise", "softmax"}};
  for (const auto& [kind, type] : op_type) {
    SCOPED_TRACE(kind);
    ASSERT_OK_AND_ASSIGN(CalibrationGraph one, MakeCalibrationGraph(kind, 0, 2));
    ASSERT_OK_AND_ASSIGN(CalibrationGraph chain, MakeCalibrationGraph(kind, 1, 2));
    EXPECT_DOUBLE_EQ(chain.flops, 5 * one.flops);
    EXPECT_DOUBLE_EQ(chain.bytes, 5 * one.bytes);
    EXPECT_GT(one.flops + one.bytes, 0);
    for (const auto& [g, count] : {std::make_pair(&one, 1), std::make_pair(&chain, 5)}) {
      ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("x:2"));
      ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(g->layout, mesh));
      ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g->graph, mesh, rules));
      int found = 0, previous_output = -1;
      for (const v1::Instruction& inst : program.instructions()) {
        if (!inst.has_local() || inst.local().type() != type) continue;
        if (previous_output >= 0) {  // reads the last one's result
          EXPECT_EQ(inst.inputs(0), previous_output) << inst.source_op();
        }
        previous_output = inst.output();
        ++found;
      }
      EXPECT_EQ(found, count);
    }
  }
}

// Groups of 2 on 4 workers: the collective graphs sized for 2, replicated over r:2, lower to one
// collective over x only, sending what they send on x:2.
TEST(CalibrateTest, CollectivesInGroupsSmallerThanTheCluster) {
  for (const char* kind : {"allreduce", "allgather", "alltoall"}) {
    SCOPED_TRACE(kind);
    ASSERT_OK_AND_ASSIGN(CalibrationGraph g, MakeCalibrationGraph(kind, 0, 2));
    ASSERT_OK_AND_ASSIGN(int64_t alone, CheckCalibrationProgram(kind, g, 2));
    ASSERT_OK_AND_ASSIGN(int64_t replicated, CheckCalibrationProgram(kind, g, 2, 2));
    // Groups of every second worker (x:2,r:2), the arrangement measured across hosts.
    ASSERT_OK_AND_ASSIGN(int64_t strided, CheckCalibrationProgram(kind, g, 2, 2, true));
    EXPECT_EQ(replicated, alone);
    EXPECT_EQ(strided, alone);
    EXPECT_GT(alone, 0);
  }
}

TEST(CalibrateTest, AGraphThatMeasuresSomethingElseIsCaught) {
  ASSERT_OK_AND_ASSIGN(CalibrationGraph g, MakeCalibrationGraph("allgather", 0, 2));
  EXPECT_TRUE(StatusIs(CheckCalibrationProgram("alltoall", g, 2).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {"'alltoall' calibration graph", "(allgather)", "instead of one alltoall"}));
  EXPECT_TRUE(StatusIs(MakeCalibrationGraph("gemv", 0, 2).status(),
                       absl::StatusCode::kInvalidArgument, {"'gemv'"}));
}

// The calibration is written as the cost model's profile and reads back with the measured figures.
TEST(CalibrateTest, TheProfileIsTheCostModelsAndReadsBack) {
  Calibration c;
  c.workers = 2;
  c.collective_group = 2;
  c.step_overhead_seconds = 0.0012;
  c.gemm_flops_per_second = 9.5e10;
  c.small_gemm_flops_per_second = 4e10;
  c.memory_bytes_per_second = 8e9;
  c.comm["allreduce"] = CommFit{3e-4, 2.5e9};
  const std::string text = FormatCalibration(c, "test");
  EXPECT_TRUE(absl::StrContains(text, "# meshrt calibration: test\n")) << text;
  EXPECT_TRUE(absl::StrContains(text,
                                "# workers 2, collectives in groups of 2, step overhead "
                                "0.0012 s\n"))
      << text;
  ASSERT_OK_AND_ASSIGN(HardwareProfile p, ParseHardwareProfile(text, "calibrated"));
  EXPECT_DOUBLE_EQ(p.gemm_large_flops_per_s, 9.5e10);
  EXPECT_DOUBLE_EQ(p.gemm_small_flops_per_s, 4e10);
  // The two rates are anchored at the smallest dims of the products that measured them.
  EXPECT_DOUBLE_EQ(p.gemm_small_dim, 32);
  EXPECT_DOUBLE_EQ(p.gemm_large_dim, 512);
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 2.0 * 512 * 1024 * 1024, 512), 9.5e10);
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 2.0 * 128 * 128 * 32, 32), 4e10);
  EXPECT_DOUBLE_EQ(p.memory_bytes_per_s, 8e9);
  EXPECT_DOUBLE_EQ(p.elementwise_flops_per_s, 1e9);  // no softmax rate: the negation's
  EXPECT_DOUBLE_EQ(p.step_overhead_s, 0.0012);
  c.elementwise_flops_per_second = 6.5e9;
  EXPECT_DOUBLE_EQ(ToHardwareProfile(c, "t").elementwise_flops_per_s, 6.5e9);
  EXPECT_TRUE(p.collectives_measured);
  EXPECT_DOUBLE_EQ(p.collectives.at("allreduce").alpha_s, 3e-4);
  EXPECT_DOUBLE_EQ(p.collectives.at("allreduce").beta_bytes_per_s, 2.5e9);
  EXPECT_TRUE(p.cross_host.empty());  // one host: no cross-host link is written
}

// Workers on two hosts: the links measured across them are the profile's cross_host ones, and the
// file says which hosts and arrangements were measured.
TEST(CalibrateTest, CrossHostLinksAreWrittenAndReadBack) {
  Calibration c;
  c.workers = 4;
  c.collective_group = 2;
  c.hosts = {"10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"};
  c.comm["allreduce"] = CommFit{3e-4, 2.5e9};
  c.cross_host_comm["allreduce"] = CommFit{2e-3, 1e8};
  const std::string text = FormatCalibration(c, "test");
  EXPECT_TRUE(absl::StrContains(text,
                                "# hosts 10.0.0.1 x2, 10.0.0.2 x2; collectives measured within "
                                "a host and across hosts (cross_host.*)\n"))
      << text;
  ASSERT_OK_AND_ASSIGN(HardwareProfile p, ParseHardwareProfile(text, "calibrated"));
  EXPECT_TRUE(p.collectives_measured);
  EXPECT_DOUBLE_EQ(p.collectives.at("allreduce").beta_bytes_per_s, 2.5e9);
  EXPECT_DOUBLE_EQ(p.cross_host.at("allreduce").alpha_s, 2e-3);
  EXPECT_DOUBLE_EQ(p.cross_host.at("allreduce").beta_bytes_per_s, 1e8);
  // Only across hosts (one worker per host): still measured, and said so.
  c.comm.clear();
  const std::string only = FormatCalibration(c, "test");
  EXPECT_TRUE(absl::StrContains(only, "collectives measured across hosts (cross_host.*)\n"))
      << only;
  ASSERT_OK_AND_ASSIGN(HardwareProfile q, ParseHardwareProfile(only, "calibrated"));
  EXPECT_TRUE(q.collectives_measured);
}

}  // namespace
}  // namespace meshrt
