// StepHistory keeps a bounded loss curve spread evenly over the whole run, ending at the newest
// point, and measures steps/s over recent requests; ErrorLog keeps the newest errors.
#include "coordinator/step_history.h"

#include "gtest/gtest.h"

namespace meshrt {
namespace {

TEST(StepHistoryTest, KeepsTheWholeRunEvenlyThinnedWithinItsBound) {
  StepHistory h(/*max_points=*/10);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int64_t step = 1; step <= 1000; ++step) {
    h.Record(step, t0 + absl::Milliseconds(step), static_cast<float>(1000 - step));
  }
  const std::vector<LossPoint> loss = h.Loss();
  ASSERT_GE(loss.size(), 5u);
  ASSERT_LE(loss.size(), 11u);  // the bound, plus the newest point
  EXPECT_EQ(loss.front().step, 1);
  EXPECT_EQ(loss.back().step, 1000);
  EXPECT_EQ(loss.back().loss, 0.0f);
  // Evenly spaced except for the newest point, and each loss is its own step's.
  const int64_t spacing = loss[1].step - loss[0].step;
  EXPECT_GT(spacing, 1);
  for (size_t i = 0; i + 1 < loss.size(); ++i) {
    EXPECT_EQ(loss[i].loss, static_cast<float>(1000 - loss[i].step));
    if (i + 2 < loss.size()) EXPECT_EQ(loss[i + 1].step - loss[i].step, spacing) << i;
  }
  // The span covers the run: the last kept point before the newest is within one spacing.
  EXPECT_GT(loss[loss.size() - 2].step, 1000 - spacing - 1);
}

TEST(StepHistoryTest, ShortRunsKeepEveryPointAndStepsWithoutLossCountForTheRateOnly) {
  StepHistory h(2000);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  h.Record(10, t0, 5.0f);
  h.Record(20, t0 + absl::Seconds(1), std::nullopt);
  h.Record(30, t0 + absl::Seconds(2), 4.0f);
  const std::vector<LossPoint> loss = h.Loss();
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_EQ(loss[0].step, 10);
  EXPECT_EQ(loss[1].step, 30);
  EXPECT_EQ(loss[1].loss, 4.0f);
  // 20 steps in 2 s.
  EXPECT_DOUBLE_EQ(h.StepsPerSecond(t0 + absl::Seconds(2)), 10.0);
  // Nothing ran in the last 20 s: 0.
  EXPECT_EQ(h.StepsPerSecond(t0 + absl::Seconds(60)), 0.0);
  EXPECT_EQ(StepHistory().StepsPerSecond(t0), 0.0);
}

TEST(ErrorLogTest, KeepsTheNewestFirstWithinItsCapacity) {
  ErrorLog log(3);
  for (int i = 0; i < 5; ++i) log.Add("s", "error " + std::to_string(i));
  const std::vector<ErrorEvent> recent = log.Recent();
  ASSERT_EQ(recent.size(), 3u);
  EXPECT_EQ(recent[0].message, "error 4");
  EXPECT_EQ(recent[2].message, "error 2");
}

}  // namespace
}  // namespace meshrt
