#include "coordinator/step_history.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace meshrt {

EvenCurve::EvenCurve(int max_points) : max_points_(std::max(max_points, 2)) {}

void EvenCurve::Add(int64_t step, double value) {
  const CurvePoint point{step, value};
  newest_ = point;
  if (seen_++ % stride_ != 0) return;
  if (static_cast<int>(points_.size()) >= max_points_) {
    // Keep the points at even positions: points number 0, 2·stride, 4·stride, ... — which are
    // the multiples of the new stride, so later points continue the same spacing.
    size_t kept = 0;
    for (size_t i = 0; i < points_.size(); i += 2) points_[kept++] = points_[i];
    points_.resize(kept);
    stride_ *= 2;
    if ((seen_ - 1) % stride_ != 0) return;
  }
  points_.push_back(point);
}

std::vector<CurvePoint> EvenCurve::Points() const {
  std::vector<CurvePoint> out = points_;
  if (newest_.has_value() && (out.empty() || out.back().step != newest_->step)) {
    out.push_back(*newest_);
  }
  return out;
}

StepHistory::StepHistory(int max_points) : max_points_(std::max(max_points, 2)), loss_(max_points_) {}

void StepHistory::Record(int64_t step, absl::Time at, std::optional<float> loss) {
  absl::MutexLock lock(&mu_);
  marks_.push_back(Mark{at, step});
  while (marks_.size() > 64) marks_.pop_front();
  if (loss.has_value()) loss_.Add(step, *loss);
}

std::vector<LossPoint> StepHistory::Loss() const {
  absl::MutexLock lock(&mu_);
  std::vector<LossPoint> out;
  for (const CurvePoint& p : loss_.Points()) out.push_back({p.step, static_cast<float>(p.value)});
  return out;
}

namespace {

bool IsMetricName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && !absl::StrContains("_.:/-", c)) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status StepHistory::RecordMetrics(const std::vector<MetricValue>& points) {
  absl::MutexLock lock(&mu_);
  std::set<std::string> added;
  for (const MetricValue& p : points) {
    if (!IsMetricName(p.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric name '", absl::CHexEscape(p.name.substr(0, 80)),
          "' is not 1-64 characters of letters, digits and _ . : / -"));
    }
    if (p.step < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", p.name, "' at step ", p.step, ": steps are >= 0"));
    }
    if (!std::isfinite(p.value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", p.name, "' at step ", p.step, " is ", p.value,
                       ": values must be finite"));
    }
    if (!metrics_.count(p.name)) added.insert(p.name);
  }
  if (metrics_.size() + added.size() > kMaxMetrics) {
    return absl::InvalidArgumentError(
        absl::StrCat("a session keeps at most ", kMaxMetrics, " metric names; it has ",
                     metrics_.size(), " and these points add ", added.size()));
  }
  for (const MetricValue& p : points) {
    metrics_.try_emplace(p.name, max_points_).first->second.Add(p.step, p.value);
  }
  return absl::OkStatus();
}

std::vector<MetricCurve> StepHistory::Metrics() const {
  absl::MutexLock lock(&mu_);
  std::vector<MetricCurve> out;
  for (const auto& [name, curve] : metrics_) out.push_back({name, curve.Points()});
  return out;
}

double StepHistory::StepsPerSecond(absl::Time now, absl::Duration window) const {
  absl::MutexLock lock(&mu_);
  // The first mark in the window and the one before it (the start of the first request in it).
  size_t first = marks_.size();
  for (size_t i = 0; i < marks_.size(); ++i) {
    if (now - marks_[i].at <= window) {
      first = i;
      break;
    }
  }
  if (first == marks_.size()) return 0;
  if (first > 0) --first;
  const Mark& a = marks_[first];
  const Mark& b = marks_.back();
  const double seconds = absl::ToDoubleSeconds(b.at - a.at);
  if (seconds <= 0 || b.step <= a.step) return 0;
  return static_cast<double>(b.step - a.step) / seconds;
}

ErrorLog::ErrorLog(int capacity) : capacity_(std::max(capacity, 1)) {}

void ErrorLog::Add(std::string session, std::string message, absl::Time at) {
  absl::MutexLock lock(&mu_);
  events_.push_front(ErrorEvent{at, std::move(session), std::move(message)});
  while (static_cast<int>(events_.size()) > capacity_) events_.pop_back();
}

std::vector<ErrorEvent> ErrorLog::Recent() const {
  absl::MutexLock lock(&mu_);
  return std::vector<ErrorEvent>(events_.begin(), events_.end());
}

}  // namespace meshrt
