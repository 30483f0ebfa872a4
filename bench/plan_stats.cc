#include "bench/plan_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace meshrt {
namespace bench {

double ErrorPercent(double predicted, double measured) {
  return 100.0 * (predicted - measured) / measured;
}

std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean_rank = 0.5 * static_cast<double>(i + j) + 1;  // ranks i+1 .. j+1
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean_rank;
    i = j + 1;
  }
  return ranks;
}

std::optional<double> Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return std::nullopt;
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1) / 2;  // of ranks 1..n, ties included
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va == 0 || vb == 0) return std::nullopt;
  return cov / std::sqrt(va * vb);
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

PlanGoals CheckPlanGoals(const std::vector<PlanRow>& rows) {
  PlanGoals g;
  std::vector<double> errors;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_model;
  for (const PlanRow& r : rows) {
    if (r.measured_ms <= 0) continue;
    const double e = std::fabs(ErrorPercent(r.predicted_ms, r.measured_ms));
    errors.push_back(e);
    if (g.worst_case.empty() || e > g.max_abs_error) {
      g.max_abs_error = e;
      g.worst_case = r.model + " " + r.name;
    }
    by_model[r.model].first.push_back(r.predicted_ms);
    by_model[r.model].second.push_back(r.measured_ms);
  }
  g.median_abs_error = MedianOf(errors);
  g.median_met = !errors.empty() && g.median_abs_error <= kMedianErrorGoalPercent;
  g.max_met = !errors.empty() && g.max_abs_error <= kMaxErrorGoalPercent;
  g.rankings_met = !by_model.empty();
  for (const auto& [model, series] : by_model) {
    ModelRanking& m = g.rankings[model];
    m.cases = static_cast<int>(series.first.size());
    m.spearman = Spearman(series.first, series.second);
    m.met = m.cases >= kMinRankedCases && m.spearman.has_value() && *m.spearman >= kSpearmanGoal;
    g.rankings_met = g.rankings_met && m.met;
  }
  g.all_met = g.median_met && g.max_met && g.rankings_met;
  return g;
}

}  // namespace bench
}  // namespace meshrt
