#include "runtime/overlap_choice.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// Runs `choice` through its schedule, each run taking on_s or off_s; returns the modes it asked for.
std::vector<bool> RunSchedule(OverlapChoice* choice, double on_s, double off_s, int runs) {
  std::vector<bool> modes;
  for (int i = 0; i < runs; ++i) {
    const bool on = choice->NextOverlap();
    modes.push_back(on);
    choice->Record(on, on ? on_s : off_s);
  }
  return modes;
}

TEST(OverlapChoiceTest, WarmsUpOnThenAlternatesThenKeepsItsChoice) {
  OverlapChoice choice(/*warmup=*/2, /*trials=*/3, /*margin=*/0.02);
  const std::vector<bool> modes = RunSchedule(&choice, 0.070, 0.067, 10);
  EXPECT_THAT(modes, testing::ElementsAre(true, true, true, false, true, false, true, false,
                                          false, false));
  EXPECT_TRUE(choice.decided());
  EXPECT_FALSE(choice.overlap());
}

TEST(OverlapChoiceTest, UndecidedUntilBothModesHaveTheirTrials) {
  OverlapChoice choice(2, 3, 0.02);
  RunSchedule(&choice, 0.070, 0.067, 7);
  EXPECT_FALSE(choice.decided());
  EXPECT_EQ(choice.Summary(), "measuring (7 of 8 steps)");
  RunSchedule(&choice, 0.070, 0.067, 1);
  EXPECT_TRUE(choice.decided());
}

TEST(OverlapChoiceTest, KeepsOverlapUnlessOffIsFasterByMoreThanTheMargin) {
  OverlapChoice slower_on(0, 3, 0.02);
  RunSchedule(&slower_on, 0.100, 0.090, 6);
  EXPECT_FALSE(slower_on.overlap());

  OverlapChoice within_margin(0, 3, 0.02);
  RunSchedule(&within_margin, 0.100, 0.099, 6);
  EXPECT_TRUE(within_margin.overlap());

  OverlapChoice faster_on(0, 3, 0.02);
  RunSchedule(&faster_on, 0.090, 0.100, 6);
  EXPECT_TRUE(faster_on.overlap());
}

TEST(OverlapChoiceTest, DecidesOnMediansSoOneSlowStepDoesNotSwayIt) {
  OverlapChoice choice(0, 3, 0.02);
  // on: 100, 100, 100 ms; off: 90, 500 (one stall), 90 ms.
  const double times[] = {0.100, 0.090, 0.100, 0.500, 0.100, 0.090};
  for (double t : times) choice.Record(choice.NextOverlap(), t);
  ASSERT_TRUE(choice.decided());
  EXPECT_FALSE(choice.overlap());
  EXPECT_EQ(choice.Summary(),
            "off (step medians: on 100.0 ms, off 90.0 ms, 3 steps each; off is kept only when "
            "faster by more than 2%)");
}

TEST(OverlapChoiceTest, RecordsAfterTheDecisionChangeNothing) {
  OverlapChoice choice(0, 1, 0.02);
  RunSchedule(&choice, 0.050, 0.100, 2);
  ASSERT_TRUE(choice.decided());
  ASSERT_TRUE(choice.overlap());
  for (int i = 0; i < 5; ++i) choice.Record(false, 0.001);
  EXPECT_TRUE(choice.overlap());
  EXPECT_TRUE(choice.NextOverlap());
}

}  // namespace
}  // namespace meshrt
