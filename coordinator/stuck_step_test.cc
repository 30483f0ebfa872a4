// The stuck-step watchdog's logic with fabricated activities: limits, which step of a request is
// in progress, and which processor the others wait for.
#include "coordinator/stuck_step.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// Processor p of a rows:2,cols:2 mesh, heard from 0.2 s ago, without an activity.
ProcessorView Processor(int p) {
  ProcessorView v;
  v.processor = p;
  v.worker_id = 10 + p;
  v.address = absl::StrCat("10.0.0.", p, ":7000");
  v.coordinate = {p / 2, p % 2};
  v.heartbeat_age = absl::Milliseconds(200);
  return v;
}

// Running `step` at `ordinal`, in instruction `instruction`, a collective when `collective`.
v1::WorkerActivity Running(int64_t step, int64_t ordinal, int instruction, const std::string& op,
                           const std::string& collective = "", int64_t instruction_ms = 9800) {
  v1::WorkerActivity a;
  a.set_session("s-1");
  a.set_step(step);
  a.set_running(true);
  a.set_ordinal(ordinal);
  a.set_instruction(instruction);
  a.set_op(op);
  a.set_instruction_ms(instruction_ms);
  if (collective.empty()) {
    a.set_kind("local op 'einsum'");
  } else {
    a.set_collective(collective);
    a.set_kind(absl::StrCat("collective ", collective, " over [rows]"));
    a.add_mesh_dims("rows");
  }
  return a;
}

v1::WorkerActivity Idle(int64_t step) {
  v1::WorkerActivity a;
  a.set_session("s-1");
  a.set_step(step);
  a.set_running(false);
  return a;
}

TEST(StepDurationsTest, MedianOfTheLastOnes) {
  StepDurations d;
  EXPECT_EQ(d.Median(), absl::ZeroDuration());
  for (int ms : {5, 1, 100, 3, 4}) d.Add(absl::Milliseconds(ms));
  EXPECT_EQ(d.Median(), absl::Milliseconds(4));
  for (int i = 0; i < StepDurations::kKeep; ++i) d.Add(absl::Seconds(2));
  EXPECT_EQ(d.size(), StepDurations::kKeep);
  EXPECT_EQ(d.Median(), absl::Seconds(2));  // the early ones are forgotten
}

TEST(StepDurationsTest, TheLimitIsTheFloorOrFactorTimesTheMedian) {
  StuckStepOptions o;  // 10 s, 5x
  StepDurations d;
  EXPECT_EQ(StuckStepLimit(o, d), absl::Seconds(10));
  d.Add(absl::Milliseconds(12));
  EXPECT_EQ(StuckStepLimit(o, d), absl::Seconds(10));
  EXPECT_TRUE(absl::StrContains(DescribeStuckStepLimit(o, d), "--stuck_step_min_ms=10000"));
  EXPECT_TRUE(
      absl::StrContains(DescribeStuckStepLimit(o, d), "median of the last 1 step times, 12 ms"));
  d.Add(absl::Seconds(3));
  d.Add(absl::Seconds(3));
  EXPECT_EQ(StuckStepLimit(o, d), absl::Seconds(15));
  EXPECT_TRUE(absl::StartsWith(DescribeStuckStepLimit(o, d), "15.0 s"));
}

// A request of steps 11..14: each step is timed from the activities' step numbers, not the
// request as a whole.
TEST(StepProgressTest, EachStepOfARequestIsTimedOnItsOwn) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  StepProgress progress(11, 14, t0);
  StepDurations d;
  std::vector<ProcessorView> ps = {Processor(0), Processor(1)};
  progress.Update(ps, t0 + absl::Seconds(1), &d);  // nobody reported: still step 11
  EXPECT_FALSE(progress.reported());
  EXPECT_EQ(progress.step(), 11);
  EXPECT_EQ(progress.elapsed(t0 + absl::Seconds(1)), absl::Seconds(1));
  EXPECT_EQ(d.size(), 0);

  ps[0].activity = Running(13, 4, 2, "h");
  ps[1].activity = Running(13, 2, 1, "g");
  progress.Update(ps, t0 + absl::Seconds(4), &d);  // steps 11 and 12 done in 4 s
  EXPECT_TRUE(progress.reported());
  EXPECT_EQ(progress.step(), 13);
  EXPECT_EQ(progress.elapsed(t0 + absl::Seconds(5)), absl::Seconds(1));
  ASSERT_EQ(d.size(), 1);
  EXPECT_EQ(d.Median(), absl::Seconds(2));

  ps[1].activity = Running(14, 1, 0, "x");  // processor 0 is still on 13
  progress.Update(ps, t0 + absl::Seconds(6), &d);
  EXPECT_EQ(progress.step(), 13);
  ps[0].activity = Idle(14);  // both done with 13; processor 0 even with 14
  progress.Update(ps, t0 + absl::Seconds(7), &d);
  EXPECT_EQ(progress.step(), 14);
  progress.Finish(t0 + absl::Seconds(8), &d);
  EXPECT_EQ(d.size(), 3);  // 2 s, 3 s (step 13), 1 s (step 14)
  EXPECT_EQ(d.Median(), absl::Seconds(2));
}

TEST(StepProgressTest, ReportsOfEarlierRequestsDoNotMoveTheStepBack) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  StepProgress progress(21, 21, t0);
  StepDurations d;
  std::vector<ProcessorView> ps = {Processor(0), Processor(1)};
  ps[0].activity = Running(20, 7, 3, "y");  // sent just before the last request ended
  ps[1].activity = Idle(20);
  progress.Update(ps, t0 + absl::Seconds(1), &d);
  EXPECT_EQ(progress.step(), 21);
  EXPECT_EQ(d.size(), 0);
  EXPECT_EQ(progress.elapsed(t0 + absl::Seconds(2)), absl::Seconds(2));
}

// Processor 2 is frozen in a local op; the others wait in collectives further on.
TEST(DiagnoseStuckStepTest, NamesTheProcessorBehindAndWhereTheOthersWait) {
  std::vector<ProcessorView> ps = {Processor(0), Processor(1), Processor(2), Processor(3)};
  ps[0].activity = Running(7, 9, 12, "grad_w", "ALLREDUCE", 9900);
  ps[1].activity = Running(7, 9, 12, "grad_w", "ALLREDUCE", 9900);
  ps[2].activity = Running(7, 5, 4, "h", "", 10100);
  ps[2].activity->set_note("frozen on purpose by --debug_freeze_at_step (a test fault)");
  ps[3].activity = Running(7, 7, 8, "grad_h", "ALLGATHER", 9950);
  const StuckDiagnosis d =
      DiagnoseStuckStep(7, absl::Seconds(10.2), "10 s", ps, /*stale_heartbeat=*/absl::Seconds(2));
  ASSERT_EQ(d.behind, std::vector<int>({2}));
  const std::string& m = d.message;
  EXPECT_TRUE(absl::StartsWith(m, "step 7 has run for 10.2 s, over the stuck-step limit of 10 s: "))
      << m;
  EXPECT_TRUE(absl::StrContains(
      m,
      "processor 2 (worker 12, 10.0.0.2:7000, mesh coordinate (1,0)) has not arrived: it is in "
      "instruction 4 (source_op 'h', local op 'einsum') of step 7 for 10.3 s [frozen on "
      "purpose"))
      << m;
  EXPECT_TRUE(absl::StrContains(m,
                                "Meanwhile processor 0 (worker 10, 10.0.0.0:7000, mesh "
                                "coordinate (0,0)) waits in instruction 12 (source_op "
                                "'grad_w', collective ALLREDUCE over [rows])"))
      << m;
  EXPECT_TRUE(absl::StrContains(m, "processor 3 (worker 13")) << m;
}

TEST(DiagnoseStuckStepTest, AProcessorAStepBehindIsTheOneNamed) {
  std::vector<ProcessorView> ps = {Processor(0), Processor(1)};
  ps[0].activity = Running(8, 1, 3, "x", "PERMUTE");
  ps[1].activity = Running(7, 40, 30, "update", "");
  EXPECT_EQ(DiagnoseStuckStep(8, absl::Seconds(11), "10 s", ps, absl::Seconds(2)).behind,
            std::vector<int>({1}));
  ps[1].activity = Idle(7);  // done with 7, never started 8 (its request did not arrive)
  const StuckDiagnosis d = DiagnoseStuckStep(8, absl::Seconds(11), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(d.behind, std::vector<int>({1}));
  EXPECT_TRUE(absl::StrContains(d.message, "has not arrived: it is idle after step 7"))
      << d.message;
}

TEST(DiagnoseStuckStepTest, AProcessorWithoutHeartbeatsIsNotResponding) {
  std::vector<ProcessorView> ps = {Processor(0), Processor(1)};
  ps[0].activity = Running(3, 2, 1, "y", "ALLREDUCE");
  ps[1].activity = Running(3, 9, 6, "z", "ALLREDUCE");  // ahead, but its heartbeats stopped
  ps[1].heartbeat_age = absl::Seconds(6);
  const StuckDiagnosis d = DiagnoseStuckStep(3, absl::Seconds(11), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(d.behind, std::vector<int>({1}));
  EXPECT_TRUE(absl::StrContains(d.message,
                                "processor 1 (worker 11, 10.0.0.1:7000, mesh "
                                "coordinate (0,1)) is not responding (no heartbeat "
                                "for 6.0 s"))
      << d.message;
  EXPECT_FALSE(absl::StrContains(d.message, "died")) << d.message;
}

TEST(DiagnoseStuckStepTest, AProcessorThatReportedNothingIsBehind) {
  std::vector<ProcessorView> ps = {Processor(0), Processor(1), Processor(2)};
  ps[0].activity = Running(3, 2, 1, "y", "ALLREDUCE");
  ps[2].activity = Running(3, 2, 1, "y", "ALLREDUCE");
  const StuckDiagnosis d = DiagnoseStuckStep(3, absl::Seconds(11), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(d.behind, std::vector<int>({1}));
  EXPECT_TRUE(absl::StrContains(d.message, "without any activity reported")) << d.message;
}

TEST(DiagnoseStuckStepTest, EveryoneInTheSameCollectiveIsACollectiveThatDoesNotComplete) {
  std::vector<ProcessorView> ps = {Processor(0), Processor(1)};
  ps[0].activity = Running(3, 2, 1, "y", "ALLREDUCE");
  ps[1].activity = Running(3, 2, 1, "y", "ALLREDUCE");
  const StuckDiagnosis d = DiagnoseStuckStep(3, absl::Seconds(11), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(d.behind, std::vector<int>({0, 1}));
  EXPECT_TRUE(absl::StrContains(d.message, "collective that does not complete")) << d.message;
  ps[0].activity = Running(3, 2, 1, "y");
  ps[1].activity = Running(3, 2, 1, "y");
  EXPECT_TRUE(absl::StrContains(
      DiagnoseStuckStep(3, absl::Seconds(11), "10 s", ps, absl::Seconds(2)).message,
      "slow or stuck kernel"));
}

TEST(DescribeLostWorkerTest, StoppedIsNotRespondingAndGoneIsUnreachable) {
  const absl::Status keepalive = absl::UnavailableError("keepalive watchdog timeout");
  EXPECT_TRUE(absl::StartsWith(DescribeLostWorker(keepalive, absl::Seconds(4.2), absl::Seconds(2)),
                               "is not responding (no heartbeat for 4.2 s"));
  EXPECT_TRUE(
      absl::StartsWith(DescribeLostWorker(absl::UnavailableError("Socket closed"),
                                          absl::Milliseconds(300), absl::Seconds(2)),
                       "is unreachable: its process is gone (socket closed): Socket closed"));
  // Heartbeats still fresh (or unknown) but no answer to keepalive pings: not responding either.
  EXPECT_TRUE(
      absl::StartsWith(DescribeLostWorker(keepalive, absl::Milliseconds(300), absl::Seconds(2)),
                       "is not responding (it answers no keepalive pings"));
  const absl::Status other = absl::UnavailableError("Deadline Exceeded");
  EXPECT_TRUE(absl::StartsWith(DescribeLostWorker(other, std::nullopt, absl::Seconds(2)),
                               "is unreachable (it died or its network failed): Deadline"));
}

}  // namespace
}  // namespace meshrt
