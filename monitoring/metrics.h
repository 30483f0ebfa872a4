// Metrics: counters, gauges and histograms in families with label names, rendered in the
// Prometheus text exposition format, version 0.0.4 (what a scraper of `/metrics` reads).
//
//   MetricsRegistry registry;
//   MetricFamily<Counter>* steps =
//       registry.AddCounter("meshrt_steps_total", "Steps run.", {"session"});
//   Counter* s = steps->WithLabels({"s-1"});   // once per label set: a lookup and maybe a new series
//   s->Increment();                            // hot path: one atomic operation, no allocation
//   std::string text = registry.Render();     // serve with MetricsRegistry::kContentType
//
// Conventions enforced at registration (a violation is a programming error: MESHRT_CHECK fails):
// names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* and do not start with
// "__"; a counter's name ends in `_total`; a histogram's name does not end in `_total`, `_bucket`,
// `_sum` or `_count` and it has no label `le`; its bucket bounds are finite and strictly
// increasing (the `+Inf` bucket is implicit); a name is registered once per registry. Units are the
// caller's business: use base units in the name (`_seconds`, `_bytes`).
//
// Values: a Counter only goes up (Increment ignores negative and NaN deltas; IncrementTo only
// raises it), a Gauge is set or added to, a Histogram counts observations into buckets (an
// observation v falls into every bucket whose bound is >= v; NaN is ignored).
//
// Rendering is deterministic: families sorted by name, series by label values (in label-name
// order), one `# HELP` and one `# TYPE` line per family (also for a labelled family without
// series yet), label values escaped (backslash, double quote, newline), histogram buckets
// cumulative with `le` last, then `_sum` and `_count` (`_count` always equals the `+Inf` bucket).
// Numbers: integers without a decimal point, others with the fewest digits that read back exactly,
// `+Inf`, `-Inf`, `NaN`. Collectors (AddCollector) run first, on the rendering thread: they set
// gauges (or raise counters) from state read at scrape time, such as a process's memory.
//
// Thread-safety: everything is thread-safe. Series are updated with atomics (a histogram: two
// relaxed atomic adds and a compare-and-swap loop on its sum); WithLabels takes the family's mutex
// for a map lookup; Render takes each family's mutex while it formats that family. A series
// pointer stays valid until the family's Remove of its labels (or the registry's destruction).
#ifndef MESHRT_MONITORING_METRICS_H_
#define MESHRT_MONITORING_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace meshrt {

// One series' label values, in the order of its family's label names.
using LabelValues = std::vector<std::string>;

class Counter {
 public:
  // Adds `delta`; a negative or NaN delta is ignored (a counter never decreases).
  void Increment(double delta = 1);
  // Raises the value to `total` when that is larger: a counter mirroring a monotonic source read
  // at scrape time (a process's CPU seconds).
  void IncrementTo(double total);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: the finite, strictly increasing upper bounds of the buckets (borrowed from the
  // family, which outlives its series).
  explicit Histogram(const std::vector<double>* bounds);
  // Counts `n` observations of `value` (n >= 1; a RunStep of n repetitions counts n steps of its
  // mean duration). NaN, and n < 1, are ignored.
  void Observe(double value, int64_t n = 1);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (= count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double>* bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // non-cumulative; bounds_->size() + 1
  std::atomic<double> sum_{0};
};

// What MetricFamily<T> shares, and how the registry renders it.
class MetricFamilyBase {
 public:
  virtual ~MetricFamilyBase() = default;
  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends the family's HELP, TYPE and sample lines to `out`.
  virtual void Render(std::string* out) const = 0;

 protected:
  MetricFamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  // "# HELP ...\n# TYPE name type\n".
  void RenderHeader(absl::string_view type, std::string* out) const;
  // `{a="x",b="y"}` with the escaped values, plus `extra` (e.g. `le="0.5"`) last; "" when empty.
  std::string LabelText(const LabelValues& values, absl::string_view extra = "") const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

template <typename T>
class MetricFamily : public MetricFamilyBase {
 public:
  // The series with these label values (as many as the family has label names: MESHRT_CHECK),
  // created at zero on first use.
  T* WithLabels(const LabelValues& values);
  // Forgets the series (e.g. of a session long closed); pointers to it dangle from then on. A
  // later WithLabels starts a new series at zero. No-op when absent.
  void Remove(const LabelValues& values);
  // The number of series.
  size_t size() const;
  void Render(std::string* out) const override;

 private:
  friend class MetricsRegistry;
  MetricFamily(std::string name, std::string help, std::vector<std::string> label_names,
               std::vector<double> bounds = {})
      : MetricFamilyBase(std::move(name), std::move(help), std::move(label_names)),
        bounds_(std::move(bounds)) {}
  std::unique_ptr<T> NewSeries() const;
  void CheckArity(const LabelValues& values) const;

  const std::vector<double> bounds_;  // histograms only
  mutable absl::Mutex mu_;
  std::map<LabelValues, std::unique_ptr<T>> series_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  // The Content-Type of Render's text.
  static constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Register a family (see the conventions above); the registry owns it. A family without label
  // names has its one series from the start (so it renders as 0 before any update).
  MetricFamily<Counter>* AddCounter(std::string name, std::string help,
                                    std::vector<std::string> label_names = {});
  MetricFamily<Gauge>* AddGauge(std::string name, std::string help,
                                std::vector<std::string> label_names = {});
  MetricFamily<Histogram>* AddHistogram(std::string name, std::string help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> bounds);

  // `collect` runs at the start of every Render (collectors run one Render at a time, in the order
  // added). It must not call Render. Borrowed state it reads must outlive the registry or its
  // last Render.
  void AddCollector(std::function<void()> collect);

  // Runs the collectors, then renders every family in the text format.
  std::string Render() const;

 private:
  void Register(std::unique_ptr<MetricFamilyBase> family);

  mutable absl::Mutex collect_mu_;  // one Render's collectors at a time
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<MetricFamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(mu_);
};

// Buckets for durations in seconds: `count` bounds from `start`, each `factor` times the last.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// 1 ms to 600 s in 1-2.5-5 steps (round bounds that read well as `le` values): for step and
// checkpoint durations.
std::vector<double> DurationBuckets();

// The text format's escapings: of a label value (\\, \", \n) and of HELP text (\\, \n).
std::string EscapeLabelValue(absl::string_view value);
std::string EscapeHelp(absl::string_view help);
// A sample value as the text format writes it (see above).
std::string FormatMetricValue(double value);

}  // namespace meshrt

#endif  // MESHRT_MONITORING_METRICS_H_
