#include "coordinator/step_history.h"

#include <algorithm>
#include <utility>

namespace meshrt {

StepHistory::StepHistory(int max_points) : max_points_(std::max(max_points, 2)) {}

void StepHistory::Record(int64_t step, absl::Time at, std::optional<float> loss) {
  absl::MutexLock lock(&mu_);
  marks_.push_back(Mark{at, step});
  while (marks_.size() > 64) marks_.pop_front();
  if (!loss.has_value()) return;
  const LossPoint point{step, *loss};
  newest_ = point;
  if (losses_seen_++ % stride_ != 0) return;
  if (static_cast<int>(points_.size()) >= max_points_) {
    // Keep the points at even positions: losses number 0, 2·stride, 4·stride, ... — which are
    // the multiples of the new stride, so later points continue the same spacing.
    size_t kept = 0;
    for (size_t i = 0; i < points_.size(); i += 2) points_[kept++] = points_[i];
    points_.resize(kept);
    stride_ *= 2;
    if ((losses_seen_ - 1) % stride_ != 0) return;
  }
  points_.push_back(point);
}

std::vector<LossPoint> StepHistory::Loss() const {
  absl::MutexLock lock(&mu_);
  std::vector<LossPoint> out = points_;
  if (newest_.has_value() && (out.empty() || out.back().step != newest_->step)) {
    out.push_back(*newest_);
  }
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
