// Unit tests of the Prometheus metrics registry: what it renders parses back to the values put in.
#include "common/metrics.h"

#include <gtest/gtest.h>

#include <thread>

#include "harness/prometheus_text.h"

namespace tessera::metrics {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndCumulativeHistogramsThatParseBack) {
  Registry r;
  r.GetCounter("pushes_total", "pushes", {{"pserver", "0"}}).Add(3);
  r.GetCounter("pushes_total", "pushes", {{"pserver", "0"}}).Add(2);   // the same series
  r.GetCounter("pushes_total", "pushes", {{"pserver", "0"}}).Add(-7);  // counters never go down
  r.GetGauge("version", "the version").Set(42);
  r.GetGauge("odd", "a \"label\" value", {{"path", "a\"b\\c\nd"}}).Set(-1.5);
  auto& h = r.GetHistogram("latency_seconds", "latency", {0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 5.0, 50.0}) h.Observe(v);
  auto text = r.Render();
  auto p = testing::ParsePrometheus(text);
  ASSERT_EQ(p.error, "") << text;
  EXPECT_EQ(p.types["pushes_total"], "counter");
  EXPECT_EQ(p.types["latency_seconds"], "histogram");
  EXPECT_EQ(p.Value("pushes_total", {{"pserver", "0"}}), 5);
  EXPECT_EQ(p.Value("version"), 42);
  EXPECT_EQ(p.Value("odd", {{"path", "a\"b\\c\nd"}}), -1.5);
  EXPECT_EQ(p.Value("latency_seconds_bucket", {{"le", "0.10000000000000001"}}), 2);  // 0.05 and 0.1 (le)
  EXPECT_EQ(p.Value("latency_seconds_bucket", {{"le", "1"}}), 3);
  EXPECT_EQ(p.Value("latency_seconds_bucket", {{"le", "10"}}), 4);
  EXPECT_EQ(p.Value("latency_seconds_bucket", {{"le", "+Inf"}}), 5);
  EXPECT_EQ(p.Value("latency_seconds_count"), 5);
  EXPECT_DOUBLE_EQ(p.Value("latency_seconds_sum"), 55.65);
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  Registry r;
  auto& c = r.GetCounter("n_total", "n");
  auto& h = r.GetHistogram("h_seconds", "h", LatencyBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Add();
        h.Observe(0.001);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto p = testing::ParsePrometheus(r.Render());
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("n_total"), 40000);
  EXPECT_EQ(p.Value("h_seconds_count"), 40000);
}

TEST(MetricsTest, TheParserRejectsMalformedText) {
  EXPECT_NE(testing::ParsePrometheus("x 1\n").error, "");  // no # TYPE
  EXPECT_NE(testing::ParsePrometheus("# TYPE x gauge\nx one\n").error, "");
  EXPECT_NE(testing::ParsePrometheus(
                "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n")
                .error,
            "");
}

}  // namespace
}  // namespace tessera::metrics
