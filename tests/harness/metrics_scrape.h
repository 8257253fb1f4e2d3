// Reads one value from a process's Prometheus /metrics page (for tests that check what an
// operator would see). Kept out of headers that tests include widely: httplib's system headers
// define macros (STATUS) that clash with the wire protocol's names.
#pragma once

#include <map>
#include <string>

namespace tessera::testing {

// The value of the series `metric` with exactly `labels` at `url` ("http://host:port/metrics");
// -1 when the page cannot be read or parsed, NaN when it has no such series.
double ScrapeMetric(const std::string& url, const std::string& metric,
                    const std::map<std::string, std::string>& labels = {});

}  // namespace tessera::testing
