// plan_bench's pure pieces on hand-computed values (nothing is timed).
#include "bench/plan_stats.h"

#include <cmath>

#include "gtest/gtest.h"

namespace meshrt {
namespace bench {
namespace {

TEST(PlanStatsTest, ErrorIsSignedRelativeToTheMeasurement) {
  EXPECT_DOUBLE_EQ(ErrorPercent(110, 100), 10);
  EXPECT_DOUBLE_EQ(ErrorPercent(75, 100), -25);
  EXPECT_DOUBLE_EQ(ErrorPercent(3, 2), 50);
}

TEST(PlanStatsTest, TiesShareTheirMeanRank) {
  EXPECT_EQ(Ranks({30, 10, 20}), (std::vector<double>{3, 1, 2}));
  EXPECT_EQ(Ranks({5, 1, 5, 0}), (std::vector<double>{3.5, 2, 3.5, 1}));
}

TEST(PlanStatsTest, SpearmanOfHandRankedSeries) {
  // Same order: 1; reversed: -1.
  EXPECT_DOUBLE_EQ(*Spearman({1, 2, 3, 4}, {10, 20, 30, 400}), 1);
  EXPECT_DOUBLE_EQ(*Spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1);
  // One adjacent swap in 4: rho = 1 - 6 * 2 / (4 * 15) = 0.8.
  EXPECT_NEAR(*Spearman({1, 2, 3, 4}, {1, 3, 2, 4}), 0.8, 1e-12);
  // Ties: ranks (1.5, 1.5, 3) against (1, 2, 3): cov 1.5, var 1.5 and 2 -> 1.5 / sqrt(3).
  EXPECT_NEAR(*Spearman({7, 7, 9}, {1, 2, 3}), 1.5 / std::sqrt(3.0), 1e-12);
  EXPECT_FALSE(Spearman({1}, {1}).has_value());
  EXPECT_FALSE(Spearman({1, 2}, {1, 2, 3}).has_value());
  EXPECT_FALSE(Spearman({5, 5, 5}, {1, 2, 3}).has_value());
}

TEST(PlanStatsTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(MedianOf({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(MedianOf({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(MedianOf({}), 0);
}

std::vector<PlanRow> GoodRows() {
  return {{"mlp", "dp", 105, 100}, {"mlp", "mp", 190, 200}, {"mlp", "rep", 330, 300},
          {"tf", "dp", 50, 52},    {"tf", "mp", 61, 60},    {"tf", "rep", 140, 125}};
}

TEST(PlanStatsTest, GoalsMetByAnAccurateTable) {
  const PlanGoals g = CheckPlanGoals(GoodRows());
  // |errors|: 5, 5, 10, 3.846.., 1.666.., 12 -> sorted median (5 + 5) / 2.
  EXPECT_DOUBLE_EQ(g.median_abs_error, 5);
  EXPECT_DOUBLE_EQ(g.max_abs_error, 12);
  EXPECT_EQ(g.worst_case, "tf rep");
  EXPECT_TRUE(g.median_met);
  EXPECT_TRUE(g.max_met);
  ASSERT_EQ(g.rankings.size(), 2u);
  EXPECT_EQ(g.rankings.at("mlp").cases, 3);
  EXPECT_DOUBLE_EQ(*g.rankings.at("mlp").spearman, 1);
  EXPECT_TRUE(g.rankings_met);
  EXPECT_TRUE(g.all_met);
}

TEST(PlanStatsTest, EachGoalFailsOnItsOwn) {
  // One case 40% off: the max fails, the median (of 6) does not.
  std::vector<PlanRow> rows = GoodRows();
  rows[2].predicted_ms = 420;
  PlanGoals g = CheckPlanGoals(rows);
  EXPECT_DOUBLE_EQ(g.max_abs_error, 40);
  EXPECT_EQ(g.worst_case, "mlp rep");
  EXPECT_FALSE(g.max_met);
  EXPECT_TRUE(g.median_met);
  EXPECT_FALSE(g.all_met);

  // Within 30% everywhere but the transformer's dp and mp swapped in the prediction.
  rows = GoodRows();
  rows[3].predicted_ms = 62;
  rows[4].predicted_ms = 55;
  g = CheckPlanGoals(rows);
  EXPECT_TRUE(g.max_met);
  EXPECT_NEAR(*g.rankings.at("tf").spearman, 0.5, 1e-12);
  EXPECT_FALSE(g.rankings.at("tf").met);
  EXPECT_TRUE(g.rankings.at("mlp").met);
  EXPECT_FALSE(g.rankings_met);

  // Every case 20% slow: max met, median missed.
  rows = GoodRows();
  for (PlanRow& r : rows) r.predicted_ms = 1.2 * r.measured_ms;
  g = CheckPlanGoals(rows);
  EXPECT_NEAR(g.median_abs_error, 20, 1e-9);
  EXPECT_FALSE(g.median_met);
  EXPECT_TRUE(g.max_met);
}

TEST(PlanStatsTest, TooFewCasesCannotBeRankedAndUnmeasuredRowsAreSkipped) {
  std::vector<PlanRow> rows = {
      {"mlp", "dp", 100, 100}, {"mlp", "mp", 200, 200}, {"mlp", "rep", 900, -1}};
  const PlanGoals g = CheckPlanGoals(rows);
  EXPECT_EQ(g.rankings.at("mlp").cases, 2);
  EXPECT_FALSE(g.rankings.at("mlp").met);
  EXPECT_DOUBLE_EQ(g.max_abs_error, 0);
  EXPECT_FALSE(g.all_met);
  EXPECT_FALSE(CheckPlanGoals({}).all_met);
}

}  // namespace
}  // namespace bench
}  // namespace meshrt
