// What the dashboard shows of the past: a session's recent steps (its steps/s and, for a training
// session, its loss curve and the metrics its client recorded) and the cluster's recent errors. Plain bounded containers with locks of
// their own, so the coordinator records into them without its registry lock and the dashboard's
// handlers read them in microseconds.
//
// Thread-safe.
#ifndef MESHRT_COORDINATOR_STEP_HISTORY_H_
#define MESHRT_COORDINATOR_STEP_HISTORY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace meshrt {

struct LossPoint {
  int64_t step = 0;  // the step whose loss this is (the last of a multi-step request)
  float loss = 0;
};

struct CurvePoint {
  int64_t step = 0;
  double value = 0;
};

// A curve of at most `max_points` points spread evenly over the whole run: when it is full every
// other point is dropped and from then on only every second added point is kept (then every
// fourth, ...), so a long run stays a curve of its whole length; the newest point is always
// shown too. Not thread-safe (StepHistory locks it).
class EvenCurve {
 public:
  explicit EvenCurve(int max_points);
  void Add(int64_t step, double value);
  // Oldest first, ending with the newest point.
  std::vector<CurvePoint> Points() const;

 private:
  int max_points_;
  std::vector<CurvePoint> points_;
  std::optional<CurvePoint> newest_;
  int64_t seen_ = 0;
  int64_t stride_ = 1;  // keep every stride_-th point
};

// A metric its client recorded (Coordinator::RecordMetrics), e.g. "dev_bleu".
struct MetricCurve {
  std::string name;
  std::vector<CurvePoint> points;
};

// A session's completed steps (its loss curve) and its client's metrics.
class StepHistory {
 public:
  static constexpr int kMaxMetrics = 16;  // distinct metric names per session

  explicit StepHistory(int max_points = 2000);

  // A request ended at `step` at `at` (steps count 1, 2, ...), with its fetched loss if any.
  void Record(int64_t step, absl::Time at, std::optional<float> loss);
  // The loss curve, oldest first, ending with the newest point.
  std::vector<LossPoint> Loss() const;
  // Adds points to the client's metric curves. InvalidArgument (and nothing recorded) for a name
  // that is not 1-64 characters of [A-Za-z0-9_.:/-], a negative step, a value that is not finite,
  // or a point that would make more than kMaxMetrics names.
  struct MetricValue {
    std::string name;
    int64_t step = 0;
    double value = 0;
  };
  absl::Status RecordMetrics(const std::vector<MetricValue>& points);
  // The metrics by name.
  std::vector<MetricCurve> Metrics() const;
  // Steps per second over the requests of the last `window` before `now` (at least two of them,
  // or one and the one before the window): 0 when fewer steps ran in it.
  double StepsPerSecond(absl::Time now, absl::Duration window = absl::Seconds(20)) const;

 private:
  const int max_points_;
  mutable absl::Mutex mu_;
  EvenCurve loss_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, EvenCurve> metrics_ ABSL_GUARDED_BY(mu_);
  struct Mark {
    absl::Time at;
    int64_t step;
  };
  std::deque<Mark> marks_ ABSL_GUARDED_BY(mu_);  // the last requests, for StepsPerSecond
};

struct ErrorEvent {
  absl::Time at;
  std::string session;  // "" when none (a free worker lost)
  std::string message;
};

// The cluster's recent errors (failed steps and loads, lost workers), the newest `capacity`.
class ErrorLog {
 public:
  explicit ErrorLog(int capacity = 100);
  void Add(std::string session, std::string message, absl::Time at = absl::Now());
  // Newest first.
  std::vector<ErrorEvent> Recent() const;

 private:
  const int capacity_;
  mutable absl::Mutex mu_;
  std::deque<ErrorEvent> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_STEP_HISTORY_H_
