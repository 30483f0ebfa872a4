#include "runtime/step_activity.h"

#include <time.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "runtime/test_kernels.h"

namespace meshrt {
namespace {

// Polls `activity` until `done` holds for its snapshot (at most 10 s).
template <typename F>
bool WaitFor(const StepActivity& activity, F done) {
  for (int i = 0; i < 1000; ++i) {
    if (done(activity.Read())) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST(StepActivityTest, RecordsTheStepTheInstructionAndTheOrdinal) {
  StepActivity a;
  EXPECT_FALSE(a.Read().running);
  a.BeginStep(7);
  StepActivity::Snapshot s = a.Read();
  EXPECT_TRUE(s.running);
  EXPECT_EQ(s.step, 7);
  EXPECT_EQ(s.instruction, -1);
  EXPECT_EQ(s.ordinal, 0);
  EXPECT_TRUE(a.Enter(5));
  EXPECT_TRUE(a.Enter(2));
  s = a.Read();
  EXPECT_EQ(s.instruction, 2);
  EXPECT_EQ(s.ordinal, 2);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_GE(a.Read().in_instruction, absl::Milliseconds(30));  // a coarse clock: ms resolution
  a.EndStep();
  s = a.Read();
  EXPECT_FALSE(s.running);
  EXPECT_EQ(s.step, 7);  // the last step run
  a.BeginStep(8);
  EXPECT_EQ(a.Read().ordinal, 0);
}

TEST(StepActivityTest, WaitsInNamesTheInstructionWithoutCountingAnEnter) {
  StepActivity a;
  a.BeginStep(1);
  EXPECT_TRUE(a.Enter(5));
  EXPECT_TRUE(a.Enter(9));
  absl::SleepFor(absl::Milliseconds(30));
  a.WaitsIn(5);
  StepActivity::Snapshot s = a.Read();
  EXPECT_EQ(s.instruction, 5);
  EXPECT_EQ(s.ordinal, 2);
  EXPECT_LT(s.in_instruction, absl::Milliseconds(25));  // since the WaitsIn
  a.WaitsIn(9);
  EXPECT_EQ(a.Read().instruction, 9);
  EXPECT_EQ(a.Read().ordinal, 2);
  a.EndStep();
}

TEST(StepActivityTest, TheExecutorEntersEveryInstructionIncludingDeferredAllReduces) {
  const v1::Program program = ParseProgram(kAddThenAllreduceProgram);
  TestKernels kernels;
  LocalCollectiveHub hub(*Mesh::Parse("x:1"));
  Executor executor(program, {0}, &kernels, hub.communicator(0));
  StepActivity activity;
  executor.set_activity(&activity);
  activity.BeginStep(1);
  ASSERT_OK(executor.Run({{"x", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, 4})}}));
  const StepActivity::Snapshot s = activity.Read();
  EXPECT_EQ(s.ordinal, 2);
  EXPECT_EQ(s.instruction, 1);  // the allreduce ran last, at the end of the step
}

TEST(StepActivityTest, AnAbortedActivityStopsTheStepNamingTheInstruction) {
  const v1::Program program = ParseProgram(kAddThenAllreduceProgram);
  TestKernels kernels;
  LocalCollectiveHub hub(*Mesh::Parse("x:1"));
  Executor executor(program, {0}, &kernels, hub.communicator(0));
  StepActivity activity;
  executor.set_activity(&activity);
  activity.Abort();
  activity.BeginStep(1);
  EXPECT_TRUE(StatusIs(executor.Run({{"x", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, 4})}}),
                       absl::StatusCode::kAborted,
                       {"instruction 0", "source_op 'y'", "aborted", "session"}));
}

TEST(StepActivityTest, AFrozenStepWaitsBeforeItsInstructionUntilAborted) {
  const v1::Program program = ParseProgram(kAddThenAllreduceProgram);
  TestKernels kernels;
  LocalCollectiveHub hub(*Mesh::Parse("x:1"));
  Executor executor(program, {0}, &kernels, hub.communicator(0));
  StepActivity activity;
  executor.set_activity(&activity);
  activity.FreezeAt(2, 1);
  const std::map<std::string, Tensor> feeds = {{"x", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, 4})}};
  activity.BeginStep(1);  // another step: not frozen
  ASSERT_OK(executor.Run(feeds));
  activity.EndStep();

  absl::Status result;
  std::thread step([&] {
    activity.BeginStep(2);
    result = executor.Run(feeds);
    activity.EndStep();
  });
  ASSERT_TRUE(WaitFor(activity, [](const StepActivity::Snapshot& s) { return s.frozen; }));
  absl::SleepFor(absl::Milliseconds(100));
  const StepActivity::Snapshot s = activity.Read();
  EXPECT_TRUE(s.running);
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(s.instruction, 1);
  EXPECT_EQ(s.ordinal, 2);
  EXPECT_GE(s.in_instruction, absl::Milliseconds(80));
  activity.Abort();
  step.join();
  EXPECT_TRUE(StatusIs(result, absl::StatusCode::kAborted, {"instruction 1", "source_op 'z'"}));
  EXPECT_FALSE(activity.Read().frozen);
}

TEST(StepActivityTest, FreezingAtInstructionMinusOneStopsAtTheFirstOneEntered) {
  StepActivity activity;
  activity.FreezeAt(3, -1);
  bool entered = true;
  std::thread step([&] {
    activity.BeginStep(3);
    entered = activity.Enter(9);
  });
  ASSERT_TRUE(WaitFor(activity, [](const StepActivity::Snapshot& s) { return s.frozen; }));
  EXPECT_EQ(activity.Read().instruction, 9);
  activity.Abort();
  step.join();
  EXPECT_FALSE(entered);
}

// The calling thread's CPU time.
absl::Duration ThreadCpu() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

TEST(StepActivityTest, ABusyStepThreadsCpuTimeGrowsAndABlockedOnesDoesNot) {
  StepActivity activity;
  EXPECT_FALSE(activity.Read().step_cpu.has_value());  // no step yet
  absl::Notification busy_done, release;
  std::thread step([&] {
    activity.BeginStep(1);
    // Compute until this thread has used 200 ms of CPU (however long a loaded machine makes it).
    const absl::Duration start = ThreadCpu();
    volatile uint64_t sink = 1;
    while (ThreadCpu() - start < absl::Milliseconds(200)) {
      for (int i = 0; i < 100000; ++i) sink = sink * 3 + i;
    }
    busy_done.Notify();
    release.WaitForNotification();  // blocked: no CPU
    activity.EndStep();
  });
  busy_done.WaitForNotification();
  const StepActivity::Snapshot after_busy = activity.Read();
  ASSERT_TRUE(after_busy.running);
  ASSERT_TRUE(after_busy.step_cpu.has_value());
  EXPECT_GE(*after_busy.step_cpu, absl::Milliseconds(200));
  // The CPU time is the thread's own: never more than its wall time in the step (the coarse
  // clock's resolution aside).
  EXPECT_LE(*after_busy.step_cpu, after_busy.in_step + absl::Milliseconds(20));
  absl::SleepFor(absl::Milliseconds(300));
  const StepActivity::Snapshot blocked = activity.Read();
  ASSERT_TRUE(blocked.step_cpu.has_value());
  EXPECT_GE(blocked.in_step - after_busy.in_step, absl::Milliseconds(280));
  EXPECT_LT(*blocked.step_cpu - *after_busy.step_cpu, absl::Milliseconds(20));
  release.Notify();
  step.join();
  EXPECT_FALSE(activity.Read().step_cpu.has_value());  // idle again
}

TEST(StepActivityTest, TheCpuTimeOfAThreadThatEndedIsUnknown) {
  StepActivity activity;
  std::thread step([&] { activity.BeginStep(4); });  // ends without EndStep
  step.join();
  const StepActivity::Snapshot s = activity.Read();
  EXPECT_TRUE(s.running);
  EXPECT_FALSE(s.step_cpu.has_value());
}

TEST(StepActivityTest, ASpinningStepBurnsCpuThenGoesOn) {
  StepActivity activity;
  activity.SpinAt(2, 5, absl::Milliseconds(300));
  absl::Duration took;
  bool entered = false;
  std::thread step([&] {
    activity.BeginStep(1);
    EXPECT_TRUE(activity.Enter(5));  // another step: no spin
    activity.EndStep();
    activity.BeginStep(2);
    EXPECT_TRUE(activity.Enter(4));  // another instruction: no spin
    const absl::Time start = absl::Now();
    entered = activity.Enter(5);
    took = absl::Now() - start;
    activity.EndStep();
  });
  ASSERT_TRUE(WaitFor(activity, [](const StepActivity::Snapshot& s) { return s.spinning; }));
  const StepActivity::Snapshot s = activity.Read();
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(s.instruction, 5);
  step.join();
  EXPECT_TRUE(entered);
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_FALSE(activity.Read().spinning);
}

TEST(StepActivityTest, AbortEndsASpinEarly) {
  StepActivity activity;
  activity.SpinAt(1, -1, absl::Seconds(60));
  bool entered = true;
  std::thread step([&] {
    activity.BeginStep(1);
    entered = activity.Enter(0);
  });
  ASSERT_TRUE(WaitFor(activity, [](const StepActivity::Snapshot& s) { return s.spinning; }));
  absl::SleepFor(absl::Milliseconds(100));
  const StepActivity::Snapshot s = activity.Read();
  ASSERT_TRUE(s.step_cpu.has_value());
  EXPECT_GT(*s.step_cpu, absl::Milliseconds(10));  // on the CPU, unlike a frozen step
  const absl::Time aborted = absl::Now();
  activity.Abort();
  step.join();
  EXPECT_LT(absl::Now() - aborted, absl::Seconds(5));
  EXPECT_FALSE(entered);
}

}  // namespace
}  // namespace meshrt
