// Reads one value from a process's Prometheus /metrics page (for tests that check what an
// operator would see). Kept out of headers that tests include widely: httplib's system headers
// define macros (STATUS) that clash with the wire protocol's names.
#pragma once

#include <string>

namespace tessera::testing {

// The value of `metric` (a series without labels, or with them as written in the page) at
// `url` ("http://host:port/metrics"); -1 when the page cannot be read or parsed.
double ScrapeMetric(const std::string& url, const std::string& metric);

}  // namespace tessera::testing
