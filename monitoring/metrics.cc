#include "monitoring/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/logging.h"

namespace meshrt {
namespace {

// A CAS loop: std::atomic<double>::fetch_add is C++20, and this builds as C++17.
void AtomicAdd(std::atomic<double>* a, double delta) {
  double old = a->load(std::memory_order_relaxed);
  while (!a->compare_exchange_weak(old, old + delta, std::memory_order_relaxed)) {
  }
}

bool ValidName(absl::string_view name, bool colon_allowed) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                       (colon_allowed && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void CheckLabelNames(absl::string_view family, const std::vector<std::string>& labels) {
  for (size_t i = 0; i < labels.size(); ++i) {
    MESHRT_CHECK(ValidName(labels[i], false) && !absl::StartsWith(labels[i], "__"), "metric ",
                 family, ": label name '", labels[i], "' is not [a-zA-Z_][a-zA-Z0-9_]* or starts "
                 "with __");
    for (size_t j = 0; j < i; ++j) {
      MESHRT_CHECK(labels[i] != labels[j], "metric ", family, ": label '", labels[i], "' twice");
    }
  }
}

}  // namespace

void Counter::Increment(double delta) {
  if (!(delta > 0)) return;  // negative, zero and NaN
  AtomicAdd(&value_, delta);
}

void Counter::IncrementTo(double total) {
  double old = value_.load(std::memory_order_relaxed);
  while (total > old &&
         !value_.compare_exchange_weak(old, total, std::memory_order_relaxed)) {
  }
}

void Gauge::Add(double delta) { AtomicAdd(&value_, delta); }

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value, int64_t n) {
  if (std::isnan(value) || n < 1) return;
  // The first bound >= value: `le` is inclusive. Past the last bound: the +Inf bucket.
  const size_t b = std::lower_bound(bounds_->begin(), bounds_->end(), value) - bounds_->begin();
  buckets_[b].fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  AtomicAdd(&sum_, value * static_cast<double>(n));
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.cumulative.resize(bounds_->size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = total;
  }
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

void MetricFamilyBase::RenderHeader(absl::string_view type, std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ", EscapeHelp(help_), "\n# TYPE ", name_, " ", type,
                  "\n");
}

std::string MetricFamilyBase::LabelText(const LabelValues& values, absl::string_view extra) const {
  if (values.empty() && extra.empty()) return "";
  std::string text = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppend(&text, i > 0 ? "," : "", label_names_[i], "=\"", EscapeLabelValue(values[i]),
                    "\"");
  }
  if (!extra.empty()) absl::StrAppend(&text, values.empty() ? "" : ",", extra);
  text += "}";
  return text;
}

template <typename T>
void MetricFamily<T>::CheckArity(const LabelValues& values) const {
  MESHRT_CHECK(values.size() == label_names_.size(), "metric ", name_, " has labels (",
               absl::StrJoin(label_names_, ","), ") but was given ", values.size(), " values");
}

template <typename T>
std::unique_ptr<T> MetricFamily<T>::NewSeries() const {
  return std::make_unique<T>();
}

template <>
std::unique_ptr<Histogram> MetricFamily<Histogram>::NewSeries() const {
  return std::make_unique<Histogram>(&bounds_);
}

template <typename T>
T* MetricFamily<T>::WithLabels(const LabelValues& values) {
  CheckArity(values);
  absl::MutexLock lock(&mu_);
  std::unique_ptr<T>& series = series_[values];
  if (series == nullptr) series = NewSeries();
  return series.get();
}

template <typename T>
void MetricFamily<T>::Remove(const LabelValues& values) {
  absl::MutexLock lock(&mu_);
  series_.erase(values);
}

template <typename T>
size_t MetricFamily<T>::size() const {
  absl::MutexLock lock(&mu_);
  return series_.size();
}

template <>
void MetricFamily<Counter>::Render(std::string* out) const {
  RenderHeader("counter", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, c] : series_) {
    absl::StrAppend(out, name_, LabelText(values), " ", FormatMetricValue(c->value()), "\n");
  }
}

template <>
void MetricFamily<Gauge>::Render(std::string* out) const {
  RenderHeader("gauge", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, g] : series_) {
    absl::StrAppend(out, name_, LabelText(values), " ", FormatMetricValue(g->value()), "\n");
  }
}

template <>
void MetricFamily<Histogram>::Render(std::string* out) const {
  RenderHeader("histogram", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, h] : series_) {
    const Histogram::Snapshot s = h->Read();
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      const std::string le = i < bounds_.size() ? FormatMetricValue(bounds_[i]) : "+Inf";
      absl::StrAppend(out, name_, "_bucket", LabelText(values, absl::StrCat("le=\"", le, "\"")),
                      " ", s.cumulative[i], "\n");
    }
    absl::StrAppend(out, name_, "_sum", LabelText(values), " ", FormatMetricValue(s.sum), "\n");
    absl::StrAppend(out, name_, "_count", LabelText(values), " ", s.count, "\n");
  }
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

void MetricsRegistry::Register(std::unique_ptr<MetricFamilyBase> family) {
  const std::string& name = family->name();
  MESHRT_CHECK(ValidName(name, true), "metric name '", name, "' is not [a-zA-Z_:][a-zA-Z0-9_:]*");
  CheckLabelNames(name, family->label_names());
  absl::MutexLock lock(&mu_);
  MESHRT_CHECK(!families_.count(name), "metric ", name, " registered twice");
  families_[name] = std::move(family);
}

MetricFamily<Counter>* MetricsRegistry::AddCounter(std::string name, std::string help,
                                                   std::vector<std::string> label_names) {
  MESHRT_CHECK(absl::EndsWith(name, "_total"), "counter ", name, ": a counter's name ends in _total");
  auto* family = new MetricFamily<Counter>(std::move(name), std::move(help), std::move(label_names));
  Register(std::unique_ptr<MetricFamilyBase>(family));
  if (family->label_names().empty()) family->WithLabels({});
  return family;
}

MetricFamily<Gauge>* MetricsRegistry::AddGauge(std::string name, std::string help,
                                               std::vector<std::string> label_names) {
  auto* family = new MetricFamily<Gauge>(std::move(name), std::move(help), std::move(label_names));
  Register(std::unique_ptr<MetricFamilyBase>(family));
  if (family->label_names().empty()) family->WithLabels({});
  return family;
}

MetricFamily<Histogram>* MetricsRegistry::AddHistogram(std::string name, std::string help,
                                                       std::vector<std::string> label_names,
                                                       std::vector<double> bounds) {
  for (const char* suffix : {"_total", "_bucket", "_sum", "_count"}) {
    MESHRT_CHECK(!absl::EndsWith(name, suffix), "histogram ", name, ": the name must not end in ",
                 suffix, " (the format adds _bucket, _sum and _count)");
  }
  for (const std::string& l : label_names) {
    MESHRT_CHECK(l != "le", "histogram ", name, ": 'le' is the buckets' label");
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    MESHRT_CHECK(std::isfinite(bounds[i]) && (i == 0 || bounds[i] > bounds[i - 1]), "histogram ",
                 name, ": bucket bounds must be finite and strictly increasing");
  }
  auto* family = new MetricFamily<Histogram>(std::move(name), std::move(help),
                                             std::move(label_names), std::move(bounds));
  Register(std::unique_ptr<MetricFamilyBase>(family));
  if (family->label_names().empty()) family->WithLabels({});
  return family;
}

void MetricsRegistry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

std::string MetricsRegistry::Render() const {
  {
    absl::MutexLock collect(&collect_mu_);
    std::vector<std::function<void()>> collectors;
    {
      absl::MutexLock lock(&mu_);
      collectors = collectors_;
    }
    for (const auto& c : collectors) c();
  }
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) family->Render(&out);
  return out;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  MESHRT_CHECK(start > 0 && factor > 1 && count >= 1, "ExponentialBuckets(", start, ", ", factor,
               ", ", count, ")");
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

std::vector<double> DurationBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
          1,     2.5,    5,     10,   25,    50,   100, 250,  600};
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

}  // namespace meshrt
