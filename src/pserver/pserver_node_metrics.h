// What a pserver tells about itself: its Prometheus metrics (RefreshMetrics), the console's
// /stats (StatsJson) and the summary its log ends with (MemorySummary). Pure functions of the
// service's counters and this process's memory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/metrics.h"
#include "pserver/pserver_service.h"

namespace tessera {

// Brings the registry's totals and gauges up to the service's counters (before a scrape);
// `last` holds the counters of the previous scrape.
void RefreshMetrics(PserverService& s, metrics::Registry& r, PserverService::Counters* last,
                    int64_t last_ckpt_ms);

// The console's /stats: version, requests, bytes, slots and each sparse table's rows, bytes,
// admitted and evicted counts.
nlohmann::json StatsJson(const PserverService::Counters& c, size_t slots);

// "peak resident memory 41.2 MiB; table emb: 120000 rows in 8.0 MiB (130000 admitted, 10000
// evicted)": what an operator sizing a job wants at the end.
std::string MemorySummary(const PserverService::Counters& c);

}  // namespace tessera
