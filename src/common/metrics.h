// Metrics for Prometheus: counters, gauges and histograms with fixed labels, kept in a registry
// that renders the text exposition format (version 0.0.4) for a /metrics endpoint.
//
// Each metric is created once (Registry::Counter etc. return the same object for the same name
// and labels) and updated from any thread with atomics; Render() may run concurrently.
// Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*); a bad name is a programming error
// and aborts at creation.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tessera::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Add(double v = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // ascending upper bounds; +Inf is implied
  void Observe(double v);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Take() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bound, then +Inf (not cumulative)
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

// Latency buckets in seconds, 100 us .. 10 s.
std::vector<double> LatencyBuckets();

class Registry {
 public:
  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                          const Labels& labels = {});
  // The text exposition format: # HELP, # TYPE, then one line per series.
  std::string Render() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Family {
    Kind kind;
    std::string help;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& GetFamily(const std::string& name, Kind kind, const std::string& help);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// Formats a label set as {a="x",b="y"} with values escaped (empty labels: "").
std::string FormatLabels(const Labels& labels);
// Formats a sample value as Prometheus expects (+Inf, -Inf, NaN, or a number).
std::string FormatValue(double v);

// This process's resident memory now and at its peak (VmRSS, VmHWM of /proc/self/status).
struct ProcessMemory {
  double resident_bytes = 0, peak_resident_bytes = 0;
};
ProcessMemory ReadProcessMemory();
// Sets `prefix`_resident_bytes and `prefix`_peak_resident_bytes: this process's resident memory
// now and at its peak (VmRSS, VmHWM of /proc/self/status).
void SetMemoryGauges(Registry& r, const std::string& prefix);

}  // namespace tessera::metrics
