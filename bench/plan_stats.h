// The pure pieces of plan_bench (bench/plan_bench.cc): the error of a prediction, Spearman's rank
// correlation, and issue 15 item 6's goals over a table of (model, case, predicted, measured)
// rows. Nothing here times anything; plan_stats_test checks it on hand-computed values.
//
// Goals (item 6): the median over the cases of |error| <= 15%, every case within +-30%, and per
// model the ranking of its layouts by predicted time agreeing with the measured one (Spearman's
// rho >= 0.9; a model with fewer than 3 measured cases cannot be ranked and fails the goal). The
// auto layout's goal (measured within 5% of the best hand layout on the same mesh) is checked by
// the bench itself (bench/plan_bench.cc PrintTable).
//
// Thread-safety: pure functions.
#ifndef MESHRT_BENCH_PLAN_STATS_H_
#define MESHRT_BENCH_PLAN_STATS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace meshrt {
namespace bench {

// 100 * (predicted - measured) / measured: positive when the model predicts too slow a step.
// measured must be > 0.
double ErrorPercent(double predicted, double measured);

// Ranks 1..n of `v` (ties share the mean of their ranks).
std::vector<double> Ranks(const std::vector<double>& v);

// Spearman's rho of two series of equal length: Pearson's correlation of their ranks. nullopt
// when the lengths differ, there are fewer than 2 values, or a series is constant.
std::optional<double> Spearman(const std::vector<double>& a, const std::vector<double>& b);

// The median of `v` (the mean of the middle two for an even count); 0 for none.
double MedianOf(std::vector<double> v);

struct PlanRow {
  std::string model;  // the ranking group, e.g. "mlp", "transformer small"
  std::string name;   // the case, e.g. "dp"
  double predicted_ms = 0;
  double measured_ms = 0;
};

inline constexpr double kMedianErrorGoalPercent = 15;
inline constexpr double kMaxErrorGoalPercent = 30;
inline constexpr double kSpearmanGoal = 0.9;
inline constexpr int kMinRankedCases = 3;

struct ModelRanking {
  int cases = 0;
  std::optional<double> spearman;  // nullopt: fewer than 2 cases or a constant series
  bool met = false;                // cases >= kMinRankedCases and spearman >= kSpearmanGoal
};

struct PlanGoals {
  double median_abs_error = 0;  // percent
  double max_abs_error = 0;     // percent
  std::string worst_case;       // "model name" of the max
  bool median_met = false;
  bool max_met = false;
  std::map<std::string, ModelRanking> rankings;  // by model
  bool rankings_met = false;                     // every model's
  bool all_met = false;                          // the three above (rows non-empty)
};

// The goals over `rows` (rows with measured_ms <= 0 are skipped: not measured).
PlanGoals CheckPlanGoals(const std::vector<PlanRow>& rows);

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_PLAN_STATS_H_
