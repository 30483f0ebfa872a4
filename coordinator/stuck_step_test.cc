// The stuck-step watchdog's logic with fabricated activities: limits, which step of a request is
// in progress, and which processor the others wait for.
#include "coordinator/stuck_step.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/testing/test_util.h"
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

// Processor p's report of running step 3 in instruction 4 ('layer1', an einsum; processor 0 in
// the allreduce after it) `step_ms` into the step with `cpu_ms` of CPU (-1: no CPU time).
v1::WorkerActivity Report(int p, int64_t step_ms, int64_t cpu_ms) {
  v1::WorkerActivity a = p == 0 ? Running(3, 9, 6, "grad", "ALLREDUCE", step_ms - 100)
                                : Running(3, 5, 4, "layer1", "", step_ms - 100);
  a.set_step_ms(step_ms);
  if (cpu_ms >= 0) a.set_step_cpu_ms(cpu_ms);
  return a;
}

// Feeds `watch` processor 1's reports every 200 ms from `from_ms` to `to_ms` of its step, its
// CPU time growing at `share` of a core, and processor 0's (waiting, no CPU); `cpu_at_from` is
// processor 1's CPU time at `from_ms`. Returns the views after the last, at `t0 + to_ms`.
std::vector<ProcessorView> Feed(ComputeWatch* watch, absl::Time t0, int64_t from_ms, int64_t to_ms,
                                double share, int64_t cpu_at_from = 0) {
  std::vector<ProcessorView> ps = {Processor(0), Processor(1)};
  for (int64_t ms = from_ms; ms <= to_ms; ms += 200) {
    ps[0].activity = Report(0, ms, 50);
    ps[1].activity = Report(1, ms, cpu_at_from + static_cast<int64_t>((ms - from_ms) * share));
    // The reports arrived 200 ms ago (Processor's heartbeat age).
    watch->Update(&ps, t0 + absl::Milliseconds(ms) + absl::Milliseconds(200), absl::Seconds(2));
  }
  return ps;
}

TEST(ComputeWatchTest, TheShareOfACoreOverTheLastSecondOfTheStep) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ComputeWatch watch{StuckStepOptions()};  // 25% over 1 s
  std::vector<ProcessorView> ps = Feed(&watch, t0, 0, 800, 0.98);
  EXPECT_FALSE(ps[1].cpu_share.has_value());  // under a second of the step seen: not yet known
  ps = Feed(&watch, t0, 1000, 3000, 0.98, 980);
  ASSERT_TRUE(ps[1].cpu_share.has_value());
  EXPECT_NEAR(*ps[1].cpu_share, 0.98, 0.01);
  EXPECT_TRUE(ps[1].computing);
  ASSERT_TRUE(ps[1].computed_ago.has_value());
  EXPECT_EQ(*ps[1].computed_ago, absl::Milliseconds(200));  // the report's age
  ASSERT_TRUE(ps[0].cpu_share.has_value());
  EXPECT_EQ(*ps[0].cpu_share, 0);  // waiting in the allreduce
  EXPECT_FALSE(ps[0].computed_ago.has_value());

  // Processor 1 stops computing at 3 s: its share over the last second falls to 0, and it was last
  // seen computing at its report of 3.6 s (whose second still held 0.4 s of computing).
  ps = Feed(&watch, t0, 3200, 6000, 0, 2940);
  EXPECT_EQ(*ps[1].cpu_share, 0);
  EXPECT_FALSE(ps[1].computing);
  ASSERT_TRUE(ps[1].computed_ago.has_value());
  EXPECT_GE(*ps[1].computed_ago, absl::Milliseconds(2000));
  EXPECT_LE(*ps[1].computed_ago, absl::Milliseconds(2800));

  // Another step starts afresh; stale heartbeats give no share.
  ps[1].activity = Report(1, 100, 90);
  ps[1].activity->set_step(4);
  watch.Update(&ps, t0 + absl::Seconds(7), absl::Seconds(2));
  EXPECT_FALSE(ps[1].cpu_share.has_value());
  EXPECT_FALSE(ps[1].computed_ago.has_value());
  ps[0].heartbeat_age = absl::Seconds(5);
  watch.Update(&ps, t0 + absl::Seconds(7), absl::Seconds(2));
  EXPECT_FALSE(ps[0].cpu_share.has_value());
}

TEST(ComputeWatchTest, ReportsWithoutCpuTimeGiveNoShare) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ComputeWatch watch{StuckStepOptions()};
  std::vector<ProcessorView> ps = {Processor(0), Processor(1)};
  for (int64_t ms = 0; ms <= 3000; ms += 200) {
    ps[1].activity = Report(1, ms, -1);
    watch.Update(&ps, t0 + absl::Milliseconds(ms), absl::Seconds(2));
  }
  EXPECT_FALSE(ps[1].cpu_share.has_value());
  EXPECT_FALSE(ps[1].computed_ago.has_value());
}

// Step 3 has run 14.2 s, over the 10 s limit; processor 0 waits for processor 1 in the allreduce.
std::vector<ProcessorView> Over(absl::Duration computed_ago, std::optional<double> share) {
  std::vector<ProcessorView> ps = {Processor(0), Processor(1)};
  ps[0].activity = Report(0, 14200, 50);
  ps[1].activity = Report(1, 14200, 13000);
  ps[0].cpu_share = 0;
  ps[1].cpu_share = share;
  ps[1].computing = share.has_value() && *share >= 0.25;
  if (computed_ago >= absl::ZeroDuration()) ps[1].computed_ago = computed_ago;
  return ps;
}

TEST(JudgeStepTest, ALaggardStillComputingIsSlowNotStuck) {
  const std::vector<ProcessorView> ps = Over(absl::Milliseconds(200), 0.98);
  const StepVerdict v =
      JudgeStep(3, absl::Seconds(14.2), absl::Seconds(10), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(v.kind, StepVerdict::Kind::kSlow);
  EXPECT_EQ(v.behind, std::vector<int>({1}));
  EXPECT_TRUE(absl::StrContains(
      v.message,
      "step 3 has run for 14.2 s, over the stuck-step limit of 10 s, but the processor the "
      "others wait for is still computing: processor 1 (worker 11, 10.0.0.1:7000, mesh "
      "coordinate (0,1)) in instruction 4 (source_op 'layer1', local op 'einsum') of step 3"))
      << v.message;
  EXPECT_TRUE(absl::StrContains(v.message, "its step thread using 98% of a core: slow, not stuck"))
      << v.message;
  // Within the limit there is nothing to say.
  EXPECT_EQ(JudgeStep(3, absl::Seconds(9), absl::Seconds(10), "10 s", ps, absl::Seconds(2)).kind,
            StepVerdict::Kind::kWithinLimit);
  // It computed 6 s ago and has not since: still within the limit's worth of quiet.
  EXPECT_EQ(JudgeStep(3, absl::Seconds(14.2), absl::Seconds(10), "10 s",
                      Over(absl::Seconds(6), 0.0), absl::Seconds(2))
                .kind,
            StepVerdict::Kind::kSlow);
}

TEST(JudgeStepTest, ALaggardWhoseCpuStoppedForTheLimitIsStuck) {
  // Flat since it started (never seen computing): stuck as soon as the step is over the limit.
  StepVerdict v = JudgeStep(3, absl::Seconds(10.5), absl::Seconds(10), "10 s",
                            Over(absl::Seconds(-1), 0.0), absl::Seconds(2));
  EXPECT_EQ(v.kind, StepVerdict::Kind::kStuck);
  EXPECT_EQ(v.behind, std::vector<int>({1}));
  EXPECT_TRUE(absl::StrContains(v.message, "step 3 has run for 10.5 s, over the stuck-step limit"))
      << v.message;
  EXPECT_TRUE(absl::StrContains(v.message,
                                "processor 1 (worker 11, 10.0.0.1:7000, mesh coordinate (0,1)) "
                                "has not arrived: it is in instruction 4 (source_op 'layer1'"))
      << v.message;
  EXPECT_TRUE(absl::StrContains(v.message, "its step thread using 0% of a core")) << v.message;
  // Computed until 10.1 s ago (the step has run 25 s): stuck, and the error says when it stopped.
  v = JudgeStep(3, absl::Seconds(25), absl::Seconds(10), "10 s", Over(absl::Seconds(10.1), 0.0),
                absl::Seconds(2));
  EXPECT_EQ(v.kind, StepVerdict::Kind::kStuck);
  EXPECT_TRUE(absl::StrContains(v.message, "0% of a core (last seen computing 10.1 s ago)"))
      << v.message;
}

TEST(JudgeStepTest, UnknownCpuTimeIsJudgedAsBefore) {
  const std::vector<ProcessorView> ps = Over(absl::Seconds(-1), std::nullopt);
  const StepVerdict v =
      JudgeStep(3, absl::Seconds(10.5), absl::Seconds(10), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(v.kind, StepVerdict::Kind::kStuck);
  EXPECT_EQ(v.message,
            DiagnoseStuckStep(3, absl::Seconds(10.5), "10 s", ps, absl::Seconds(2)).message);
  EXPECT_TRUE(absl::StrContains(v.message,
                                "of step 3 for 14.3 s. Meanwhile processor 0 (worker 10"))
      << v.message;  // nothing about processor 1's CPU
}

TEST(JudgeStepTest, ANotRespondingLaggardIsStuckWhateverItComputedBefore) {
  std::vector<ProcessorView> ps = Over(absl::Seconds(3), std::nullopt);
  ps[1].heartbeat_age = absl::Seconds(3);
  const StepVerdict v =
      JudgeStep(3, absl::Seconds(10.5), absl::Seconds(10), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(v.kind, StepVerdict::Kind::kStuck);
  EXPECT_TRUE(absl::StrContains(v.message,
                                "processor 1 (worker 11, 10.0.0.1:7000, mesh "
                                "coordinate (0,1)) is not responding"))
      << v.message;
}

TEST(JudgeStepTest, EveryLaggardMustCompute) {
  // Both in the same einsum: processor 0 computes, processor 1 is frozen there.
  std::vector<ProcessorView> ps = Over(absl::Milliseconds(200), 0.97);
  ps[0].activity = Report(1, 14200, 13000);
  ps[0].cpu_share = 0.01;
  StepVerdict v =
      JudgeStep(3, absl::Seconds(14.2), absl::Seconds(10), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(v.kind, StepVerdict::Kind::kStuck);
  EXPECT_EQ(v.behind, std::vector<int>({0, 1}));
  ps[0].cpu_share = 0.5;  // both compute: slow
  ps[0].computing = true;
  ps[0].computed_ago = absl::Milliseconds(200);
  v = JudgeStep(3, absl::Seconds(14.2), absl::Seconds(10), "10 s", ps, absl::Seconds(2));
  EXPECT_EQ(v.kind, StepVerdict::Kind::kSlow);
  EXPECT_TRUE(absl::StrContains(v.message, "every processor is still computing: processor 0"))
      << v.message;
  EXPECT_TRUE(absl::StrContains(v.message, "using 50% of a core; processor 1")) << v.message;
}

TEST(StepProgressTest, OneSlowWarningPerStep) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  StepProgress progress(5, 6, t0);
  StepDurations d;
  EXPECT_TRUE(progress.FirstSlowWarning());
  EXPECT_FALSE(progress.FirstSlowWarning());
  std::vector<ProcessorView> ps = {Processor(0)};
  ps[0].activity = Running(6, 1, 0, "x");
  progress.Update(ps, t0 + absl::Seconds(1), &d);
  EXPECT_TRUE(progress.FirstSlowWarning());
  EXPECT_FALSE(progress.FirstSlowWarning());
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
