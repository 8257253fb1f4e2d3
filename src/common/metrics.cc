// Prometheus metrics (see metrics.h).
#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace tessera::metrics {
namespace {

void AtomicAdd(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

bool ValidName(const std::string& n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string EscapeHelp(const std::string& s) {
  std::string out;
  for (char c : s) {
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

}  // namespace

void Counter::Add(double v) {
  if (v > 0) AtomicAdd(value_, v);
}

void Gauge::Add(double v) { AtomicAdd(value_, v); }

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  s.bounds = bounds_;
  uint64_t run = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    run += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(run);
  }
  s.count = run;  // consistent with the buckets even while observations land
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

Registry::Family& Registry::GetFamily(const std::string& name, Kind kind, const std::string& help) {
  if (!ValidName(name)) {
    std::fprintf(stderr, "metrics: invalid metric name '%s'\n", name.c_str());
    std::abort();
  }
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.kind = kind;
    it->second.help = help;
  } else if (it->second.kind != kind) {
    std::fprintf(stderr, "metrics: '%s' registered with two types\n", name.c_str());
    std::abort();
  }
  return it->second;
}

Counter& Registry::GetCounter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, Kind::kCounter, help).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, Kind::kGauge, help).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::GetHistogram(const std::string& name, const std::string& help,
                                  const std::vector<double>& bounds, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, Kind::kHistogram, help).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return *slot;
}

std::string FormatLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ",";
    out += labels[i].first + "=\"";
    for (char c : labels[i].second) {
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += "\"";
  }
  return out + "}";
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string Registry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    static const char* kTypes[] = {"counter", "gauge", "histogram"};
    out += "# HELP " + name + " " + EscapeHelp(f.help) + "\n";
    out += "# TYPE " + name + " " + kTypes[static_cast<int>(f.kind)] + "\n";
    for (const auto& [labels, c] : f.counters)
      out += name + FormatLabels(labels) + " " + FormatValue(c->value()) + "\n";
    for (const auto& [labels, g] : f.gauges)
      out += name + FormatLabels(labels) + " " + FormatValue(g->value()) + "\n";
    for (const auto& [labels, h] : f.histograms) {
      auto s = h->Take();
      for (size_t i = 0; i <= s.bounds.size(); ++i) {
        Labels l = labels;
        l.emplace_back("le", i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf");
        out += name + "_bucket" + FormatLabels(l) + " " + std::to_string(s.cumulative[i]) + "\n";
      }
      out += name + "_sum" + FormatLabels(labels) + " " + FormatValue(s.sum) + "\n";
      out += name + "_count" + FormatLabels(labels) + " " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

ProcessMemory ReadProcessMemory() {
  std::ifstream in("/proc/self/status");
  std::string line;
  ProcessMemory m;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0)
      m.resident_bytes = std::atof(line.c_str() + 6) * 1024;  // "VmRSS: 12 kB"
    if (line.rfind("VmHWM:", 0) == 0) m.peak_resident_bytes = std::atof(line.c_str() + 6) * 1024;
  }
  return m;
}

void SetMemoryGauges(Registry& r, const std::string& prefix) {
  const ProcessMemory m = ReadProcessMemory();
  r.GetGauge(prefix + "_resident_bytes", "resident memory of this process").Set(m.resident_bytes);
  r.GetGauge(prefix + "_peak_resident_bytes", "the most resident memory this process has held")
      .Set(m.peak_resident_bytes);
}

}  // namespace tessera::metrics
