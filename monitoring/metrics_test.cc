#include "monitoring/metrics.h"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "monitoring/process_metrics.h"

namespace meshrt {
namespace {

TEST(MetricsTest, CounterRendersExactly) {
  MetricsRegistry r;
  MetricFamily<Counter>* c = r.AddCounter("test_requests_total", "Requests served.", {"method"});
  c->WithLabels({"get"})->Increment(3);
  c->WithLabels({"put"})->Increment();
  c->WithLabels({"del"})->Increment(0.5);
  EXPECT_EQ(r.Render(),
            "# HELP test_requests_total Requests served.\n"
            "# TYPE test_requests_total counter\n"
            "test_requests_total{method=\"del\"} 0.5\n"
            "test_requests_total{method=\"get\"} 3\n"
            "test_requests_total{method=\"put\"} 1\n");
}

TEST(MetricsTest, UnlabelledFamiliesRenderZeroAtOnceAndFamiliesSortByName) {
  MetricsRegistry r;
  r.AddGauge("zz_gauge", "Last.");
  r.AddCounter("aa_total", "First.");
  r.AddGauge("mm_labelled", "No series yet.", {"x"});
  EXPECT_EQ(r.Render(),
            "# HELP aa_total First.\n# TYPE aa_total counter\naa_total 0\n"
            "# HELP mm_labelled No series yet.\n# TYPE mm_labelled gauge\n"
            "# HELP zz_gauge Last.\n# TYPE zz_gauge gauge\nzz_gauge 0\n");
}

TEST(MetricsTest, GaugeSetsAndAdds) {
  MetricsRegistry r;
  Gauge* g = r.AddGauge("test_temperature_celsius", "Heat.", {"room", "floor"})
                 ->WithLabels({"kitchen", "1"});
  g->Set(21.25);
  g->Add(-30);
  EXPECT_EQ(r.Render(),
            "# HELP test_temperature_celsius Heat.\n"
            "# TYPE test_temperature_celsius gauge\n"
            "test_temperature_celsius{room=\"kitchen\",floor=\"1\"} -8.75\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithInf) {
  MetricsRegistry r;
  MetricFamily<Histogram>* h =
      r.AddHistogram("test_latency_seconds", "Latency.", {"op"}, {0.1, 0.5, 1});
  Histogram* a = h->WithLabels({"a"});
  a->Observe(0.05);
  a->Observe(0.1);  // le is inclusive: 0.1 counts in the 0.1 bucket
  a->Observe(0.7);
  a->Observe(2, 2);  // two observations beyond the last bound
  EXPECT_EQ(r.Render(),
            "# HELP test_latency_seconds Latency.\n"
            "# TYPE test_latency_seconds histogram\n"
            "test_latency_seconds_bucket{op=\"a\",le=\"0.1\"} 2\n"
            "test_latency_seconds_bucket{op=\"a\",le=\"0.5\"} 2\n"
            "test_latency_seconds_bucket{op=\"a\",le=\"1\"} 3\n"
            "test_latency_seconds_bucket{op=\"a\",le=\"+Inf\"} 5\n"
            "test_latency_seconds_sum{op=\"a\"} 4.85\n"
            "test_latency_seconds_count{op=\"a\"} 5\n");
  Histogram::Snapshot s = a->Read();
  ASSERT_EQ(s.cumulative.size(), 4u);
  for (size_t i = 1; i < s.cumulative.size(); ++i) EXPECT_GE(s.cumulative[i], s.cumulative[i - 1]);
  EXPECT_EQ(s.cumulative.back(), s.count);
}

TEST(MetricsTest, UnlabelledHistogramPutsLeAlone) {
  MetricsRegistry r;
  r.AddHistogram("test_size_bytes", "Sizes.", {}, {1024})->WithLabels({})->Observe(1);
  EXPECT_EQ(r.Render(),
            "# HELP test_size_bytes Sizes.\n# TYPE test_size_bytes histogram\n"
            "test_size_bytes_bucket{le=\"1024\"} 1\n"
            "test_size_bytes_bucket{le=\"+Inf\"} 1\n"
            "test_size_bytes_sum 1\ntest_size_bytes_count 1\n");
}

TEST(MetricsTest, DurationBucketsReadWell) {
  MetricsRegistry r;
  r.AddHistogram("test_d_seconds", "D.", {}, DurationBuckets());
  const std::string text = r.Render();
  EXPECT_TRUE(absl::StrContains(text, "test_d_seconds_bucket{le=\"0.0025\"} 0\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "test_d_seconds_bucket{le=\"600\"} 0\n")) << text;
  EXPECT_EQ(ExponentialBuckets(1, 2, 3), (std::vector<double>{1, 2, 4}));
}

TEST(MetricsTest, HistogramIgnoresNaN) {
  MetricsRegistry r;
  Histogram* h = r.AddHistogram("test_h", "H.", {}, {1})->WithLabels({});
  h->Observe(std::nan(""));
  h->Observe(1, 0);
  EXPECT_EQ(h->Read().count, 0u);
}

TEST(MetricsTest, LabelValuesAndHelpAreEscaped) {
  MetricsRegistry r;
  r.AddCounter("test_escape_total", "Back\\slash and\nnewline \"quoted\".", {"path"})
      ->WithLabels({"C:\\dir \"x\"\nnext"})
      ->Increment();
  EXPECT_EQ(r.Render(),
            "# HELP test_escape_total Back\\\\slash and\\nnewline \"quoted\".\n"
            "# TYPE test_escape_total counter\n"
            "test_escape_total{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeHelp("a\\b\"c\nd"), "a\\\\b\"c\\nd");
}

TEST(MetricsTest, CountersNeverDecrease) {
  MetricsRegistry r;
  Counter* c = r.AddCounter("test_c_total", "C.")->WithLabels({});
  c->Increment(5);
  c->Increment(-3);
  c->Increment(std::nan(""));
  EXPECT_EQ(c->value(), 5);
  c->IncrementTo(4);
  EXPECT_EQ(c->value(), 5);
  c->IncrementTo(7.5);
  EXPECT_EQ(c->value(), 7.5);
}

TEST(MetricsTest, ValuesFormatShortestExact) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(12345678901.0), "12345678901");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(0.005), "0.005");
  EXPECT_EQ(FormatMetricValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatMetricValue(1e300), "1e+300");
}

TEST(MetricsTest, RemoveForgetsASeries) {
  MetricsRegistry r;
  MetricFamily<Counter>* c = r.AddCounter("test_r_total", "R.", {"s"});
  c->WithLabels({"a"})->Increment();
  c->WithLabels({"b"})->Increment();
  c->Remove({"a"});
  EXPECT_EQ(c->size(), 1u);
  EXPECT_FALSE(absl::StrContains(r.Render(), "s=\"a\""));
  EXPECT_EQ(c->WithLabels({"a"})->value(), 0);  // a new series
}

TEST(MetricsTest, CollectorsRunBeforeRendering) {
  MetricsRegistry r;
  Gauge* g = r.AddGauge("test_scrapes", "Scrapes.")->WithLabels({});
  int n = 0;
  r.AddCollector([&] { g->Set(++n); });
  EXPECT_TRUE(absl::StrContains(r.Render(), "test_scrapes 1\n"));
  EXPECT_TRUE(absl::StrContains(r.Render(), "test_scrapes 2\n"));
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry r;
  MetricFamily<Counter>* c = r.AddCounter("test_par_total", "P.", {"t"});
  Histogram* h = r.AddHistogram("test_par_seconds", "P.", {}, {0.5})->WithLabels({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Counter* mine = c->WithLabels({"shared"});
      for (int i = 0; i < 10000; ++i) {
        mine->Increment();
        h->Observe(1);
      }
      (void)r.Render();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c->WithLabels({"shared"})->value(), 40000);
  EXPECT_EQ(h->Read().count, 40000u);
  EXPECT_EQ(h->Read().sum, 40000);
}

TEST(MetricsDeathTest, ConventionsAreEnforced) {
  MetricsRegistry r;
  EXPECT_DEATH(r.AddCounter("no_suffix", "x"), "ends in _total");
  EXPECT_DEATH(r.AddGauge("bad-name", "x"), "is not");
  EXPECT_DEATH(r.AddGauge("g", "x", {"__reserved"}), "label name");
  EXPECT_DEATH(r.AddHistogram("h_seconds", "x", {"le"}, {1}), "buckets' label");
  EXPECT_DEATH(r.AddHistogram("h_count", "x", {}, {1}), "must not end in _count");
  EXPECT_DEATH(r.AddHistogram("h2_seconds", "x", {}, {2, 1}), "strictly increasing");
  r.AddGauge("dup", "x");
  EXPECT_DEATH(r.AddGauge("dup", "x"), "registered twice");
  MetricFamily<Gauge>* g = r.AddGauge("two", "x", {"a", "b"});
  EXPECT_DEATH(g->WithLabels({"only one"}), "given 1 values");
}

TEST(ProcessMetricsTest, ReadsThisProcess) {
  MetricsRegistry r;
  AddProcessMetrics(&r);
  const std::string text = r.Render();
  for (const char* name :
       {"process_resident_memory_bytes ", "process_virtual_memory_bytes ",
        "process_start_time_seconds ", "process_cpu_seconds_total ", "process_open_fds ",
        "meshrt_build_info{version=\""}) {
    EXPECT_TRUE(absl::StrContains(text, std::string("\n") + name)) << name << " in\n" << text;
  }
  // This test binary holds at least a megabyte and started after 2020 and not in the future.
  EXPECT_FALSE(absl::StrContains(text, "\nprocess_resident_memory_bytes 0\n"));
  const size_t at = text.find("\nprocess_start_time_seconds ");
  const double start = std::stod(text.substr(at + 28));
  EXPECT_GT(start, 1577836800);
  EXPECT_LT(start, 4102444800);
}

}  // namespace
}  // namespace meshrt
