// A strict reader of the Prometheus text exposition format (0.0.4), for tests: every line must be
// a comment (# HELP / # TYPE), blank, or `name{labels} value`; every sample's family must have
// been typed first; histogram buckets must be cumulative and end with le="+Inf" equal to _count.
// Test-only.
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromText {
  std::map<std::string, std::string> types;  // family -> counter/gauge/histogram
  std::vector<PromSample> samples;
  std::string error;  // empty if the text is well formed

  // The value of the sample `name` with exactly these labels (NaN if absent).
  double Value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    for (const auto& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nan("");
  }
};

inline PromText ParsePrometheus(const std::string& text) {
  PromText out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  auto fail = [&](const std::string& why) {
    if (out.error.empty()) out.error = "line " + std::to_string(n) + ": " + why + ": " + line;
  };
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream c(line);
      std::string hash, kw, name, type;
      c >> hash >> kw >> name;
      if (kw == "TYPE") {
        c >> type;
        if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
            type != "untyped")
          fail("unknown type");
        out.types[name] = type;
      } else if (kw != "HELP") {
        fail("unknown comment");
      }
      continue;
    }
    PromSample s;
    size_t i = 0;
    while (i < line.size() &&
           (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == ':'))
      ++i;
    s.name = line.substr(0, i);
    if (s.name.empty()) {
      fail("no metric name");
      continue;
    }
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          fail("bad label");
          break;
        }
        std::string key = line.substr(i, eq - i), value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
            continue;
          }
          value += line[j];
        }
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      fail("no value");
      continue;
    }
    std::string v = line.substr(i + 1);
    char* end = nullptr;
    s.value = v == "+Inf"   ? INFINITY
              : v == "-Inf" ? -INFINITY
              : v == "NaN"  ? std::nan("")
                            : std::strtod(v.c_str(), &end);
    if (end && *end != '\0') fail("bad value");
    std::string family = s.name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string suf = suffix;
      if (!out.types.count(family) && family.size() > suf.size() &&
          family.compare(family.size() - suf.size(), suf.size(), suf) == 0) {
        family = family.substr(0, family.size() - suf.size());
      }
    }
    if (!out.types.count(family)) fail("sample before its # TYPE");
    out.samples.push_back(std::move(s));
  }
  // Histograms: cumulative buckets ending with +Inf == _count.
  for (const auto& [family, type] : out.types) {
    if (type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    for (const auto& s : out.samples) {
      if (s.name != family + "_bucket") continue;
      auto labels = s.labels;
      double le = labels.at("le") == "+Inf" ? INFINITY : std::strtod(labels.at("le").c_str(), nullptr);
      labels.erase("le");
      buckets[labels].push_back({le, s.value});
    }
    for (const auto& [labels, b] : buckets) {
      for (size_t k = 1; k < b.size(); ++k) {
        if (b[k].first <= b[k - 1].first || b[k].second < b[k - 1].second)
          out.error = family + ": buckets not cumulative";
      }
      if (b.empty() || !std::isinf(b.back().first))
        out.error = family + ": no +Inf bucket";
      else if (b.back().second != out.Value(family + "_count", labels))
        out.error = family + ": +Inf bucket != _count";
    }
  }
  return out;
}

}  // namespace tessera::testing
