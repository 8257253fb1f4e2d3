// ScrapeMetric (see metrics_scrape.h).
#include "harness/metrics_scrape.h"

#include <httplib.h>

#include <regex>

#include "harness/prometheus_text.h"

namespace tessera::testing {

double ScrapeMetric(const std::string& url, const std::string& metric,
                    const std::map<std::string, std::string>& labels) {
  std::smatch m;
  if (!std::regex_match(url, m, std::regex("http://([0-9.]+):([0-9]+)(/.*)"))) return -1;
  httplib::Client http(m[1].str(), std::stoi(m[2].str()));
  auto res = http.Get(m[3].str());
  if (!res || res->status != 200) return -1;
  auto prom = ParsePrometheus(res->body);
  return prom.error.empty() ? prom.Value(metric, labels) : -1;
}

}  // namespace tessera::testing
