// A pserver's metrics, /stats and closing summary (see pserver_node_metrics.h).
#include "pserver/pserver_node_metrics.h"

#include "common/clock.h"
#include "common/strings.h"

namespace tessera {

std::string MemorySummary(const PserverService::Counters& c) {
  std::string s = "peak resident memory " + HumanBytes(metrics::ReadProcessMemory().peak_resident_bytes);
  for (const auto& p : c.params) {
    if (!p.sparse) continue;
    s += "; table " + p.name + ": " + std::to_string(p.elements) + " rows in " +
         HumanBytes(static_cast<double>(p.bytes));
    if (p.admitted > 0 || p.evicted > 0)
      s += " (" + std::to_string(p.admitted) + " admitted, " + std::to_string(p.evicted) + " evicted)";
  }
  return s;
}

void RefreshMetrics(PserverService& s, metrics::Registry& r, PserverService::Counters* last,
                    int64_t last_ckpt_ms) {
  auto c = s.counters();
  r.GetGauge("tessera_pserver_version", "the shard's version (steps applied)")
      .Set(static_cast<double>(c.version));
  r.GetCounter("tessera_pserver_pushes_total", "pushes received")
      .Add(static_cast<double>(c.pushes - last->pushes));
  r.GetCounter("tessera_pserver_pulls_total", "pulls answered")
      .Add(static_cast<double>(c.pulls - last->pulls));
  r.GetCounter("tessera_pserver_received_bytes_total", "gradient bytes received")
      .Add(static_cast<double>(c.bytes_in - last->bytes_in));
  r.GetCounter("tessera_pserver_sent_bytes_total", "parameter bytes sent")
      .Add(static_cast<double>(c.bytes_out - last->bytes_out));
  r.GetCounter("tessera_pserver_refused_pushes_total",
               "pushes refused for their content (a non-finite value, an unknown name, a wrong size); each "
               "counted as an empty push so the step closes")
      .Add(static_cast<double>(c.refused - last->refused));
  r.GetCounter("tessera_pserver_skipped_pushes_total",
               "empty pushes standing for a gradient a trainer dropped (it held NaN or infinity)")
      .Add(static_cast<double>(c.skipped - last->skipped));
  r.GetCounter("tessera_pserver_late_pushes_total",
               "sync with backup trainers: pushes that came after their step closed (dropped)")
      .Add(static_cast<double>(c.late - last->late));
  r.GetCounter("tessera_pserver_overlapped_requests_total",
               "data requests that arrived while another was being handled (trainers pushing together, "
               "or a trainer's pieces two at a time)")
      .Add(static_cast<double>(c.overlapped - last->overlapped));
  r.GetCounter("tessera_pserver_pushes_widened_as_they_came_total",
               "pushes in half precision widened into float32 and scanned as their bytes came (tcp), not "
               "after")
      .Add(static_cast<double>(c.widened_as_they_came - last->widened_as_they_came));
  r.GetGauge("tessera_pserver_initialized", "1 once the shard holds parameters").Set(c.initialized ? 1 : 0);
  metrics::SetMemoryGauges(r, "tessera_pserver");
  for (const auto& p : c.params) {
    const metrics::Labels labels = {{"kind", p.sparse ? "sparse" : "dense"}, {"param", p.name}};
    r.GetGauge("tessera_pserver_param_elements", "elements (dense) or rows (sparse) of a parameter held here",
               labels)
        .Set(static_cast<double>(p.elements));
    r.GetGauge("tessera_pserver_param_bytes",
               "bytes of a parameter held here: values and optimizer state (sparse: with keys and index)",
               labels)
        .Set(static_cast<double>(p.bytes));
    if (p.sparse) {
      r.GetGauge("tessera_pserver_table_admitted_rows",
                 "rows a sparse table's pushes created here (since the pserver started or its checkpoint)",
                 labels)
          .Set(static_cast<double>(p.admitted));
      r.GetGauge("tessera_pserver_table_evicted_rows",
                 "rows of a sparse table dropped here by its limits (evict_after, budget)", labels)
          .Set(static_cast<double>(p.evicted));
    }
  }
  if (last_ckpt_ms > 0) {
    r.GetGauge("tessera_pserver_checkpoint_age_seconds", "seconds since the last checkpoint was recorded")
        .Set((WallMillis() - last_ckpt_ms) / 1000.0);
  }
  *last = c;
}

nlohmann::json StatsJson(const PserverService::Counters& c, size_t slots) {
  nlohmann::json j;
  j.update({{"version", c.version},
            {"pushes", c.pushes},
            {"pulls", c.pulls},
            {"bytes_in", c.bytes_in},
            {"bytes_out", c.bytes_out},
            {"refused", c.refused},
            {"skipped", c.skipped},
            {"param_bytes", c.param_bytes},
            {"initialized", c.initialized},
            {"slots", slots}});
  nlohmann::json tables = nlohmann::json::array();
  for (const auto& p : c.params) {
    if (!p.sparse) continue;
    tables.push_back({{"name", p.name},
                      {"rows", p.elements},
                      {"bytes", p.bytes},
                      {"admitted", p.admitted},
                      {"evicted", p.evicted}});
  }
  j["tables"] = tables;
  return j;
}

}  // namespace tessera
