// StepHistory keeps a bounded loss curve spread evenly over the whole run, ending at the newest
// point, and measures steps/s over recent requests; it keeps a client's metric curves, refusing
// bad names, steps and values whole; ErrorLog keeps the newest errors.
#include "coordinator/step_history.h"

#include <cmath>
#include <string>
#include <vector>

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

TEST(StepHistoryTest, KeepsTheClientsMetricCurvesByName) {
  StepHistory h(/*max_points=*/4);
  ASSERT_TRUE(h.RecordMetrics({{"dev_bleu", 1, 0.5}, {"eval_loss", 1, 6.25}}).ok());
  for (int64_t step = 100; step <= 1000; step += 100) {
    ASSERT_TRUE(h.RecordMetrics({{"dev_bleu", step, step / 100.0}}).ok());
  }
  const std::vector<MetricCurve> metrics = h.Metrics();
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[0].name, "dev_bleu");
  EXPECT_EQ(metrics[1].name, "eval_loss");
  ASSERT_EQ(metrics[1].points.size(), 1u);
  EXPECT_EQ(metrics[1].points[0].step, 1);
  EXPECT_EQ(metrics[1].points[0].value, 6.25);
  // 11 points thinned to the bound (plus the newest), from the first to the last.
  const std::vector<CurvePoint>& bleu = metrics[0].points;
  ASSERT_LE(bleu.size(), 5u);
  ASSERT_GE(bleu.size(), 3u);
  EXPECT_EQ(bleu.front().step, 1);
  EXPECT_EQ(bleu.back().step, 1000);
  EXPECT_EQ(bleu.back().value, 10.0);
  for (const CurvePoint& p : bleu) {
    if (p.step > 1) EXPECT_EQ(p.value, p.step / 100.0) << p.step;
  }
  // The loss curve is separate.
  EXPECT_TRUE(h.Loss().empty());
}

TEST(StepHistoryTest, RefusesBadMetricsWholeAndBoundsTheNames) {
  StepHistory h;
  auto refused = [&](std::vector<StepHistory::MetricValue> points, const std::string& says) {
    const absl::Status s = h.RecordMetrics(points);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << says;
    EXPECT_NE(s.message().find(says), absl::string_view::npos) << s.message();
  };
  // A good point beside a bad one is not kept either.
  refused({{"ok", 1, 1.0}, {"", 1, 1.0}}, "1-64 characters");
  refused({{"has space", 1, 1.0}}, "1-64 characters");
  refused({{std::string(65, 'a'), 1, 1.0}}, "1-64 characters");
  refused({{"bleu", -1, 1.0}}, "steps are >= 0");
  refused({{"bleu", 1, std::nan("")}}, "must be finite");
  refused({{"bleu", 1, HUGE_VAL}}, "must be finite");
  EXPECT_TRUE(h.Metrics().empty());
  for (int i = 0; i < StepHistory::kMaxMetrics; ++i) {
    ASSERT_TRUE(h.RecordMetrics({{"m" + std::to_string(i), 1, 1.0}}).ok()) << i;
  }
  refused({{"one_more", 1, 1.0}}, "at most 16 metric names");
  EXPECT_TRUE(h.RecordMetrics({{"m0", 2, 2.0}}).ok());  // a known name still records
  EXPECT_EQ(h.Metrics().size(), static_cast<size_t>(StepHistory::kMaxMetrics));
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
