// An etcd member's load from its /metrics text (see etcd_load.h).
#include "etcd_load.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace tessera::bench {
namespace {

// The value of label `name` in a sample's label text ({a="x",b="y"}); empty if absent.
std::string Label(const std::string& labels, const std::string& name) {
  const std::string key = name + "=\"";
  size_t at = labels.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  size_t end = labels.find('"', at);
  return end == std::string::npos ? "" : labels.substr(at, end - at);
}

// The kind a unary method's requests count as (empty: not counted).
std::string UnaryKind(const std::string& method) {
  static const std::map<std::string, std::string> kinds = {{"Range", "range"},
                                                           {"Put", "put"},
                                                           {"Txn", "txn"},
                                                           {"DeleteRange", "delete"},
                                                           {"LeaseGrant", "lease_grant"},
                                                           {"LeaseRevoke", "lease_revoke"},
                                                           {"LeaseTimeToLive", "lease_ttl"}};
  auto it = kinds.find(method);
  return it == kinds.end() ? "" : it->second;
}

}  // namespace

double EtcdLoad::requests() const {
  double n = 0;
  for (const char* k : {"range", "put", "txn", "delete", "lease_grant", "lease_revoke", "lease_ttl",
                        "keepalive", "watch_requests"})
    n += (*this)[k];
  return n;
}

StatusOr<EtcdLoad> ParseEtcdLoad(const std::string& text) {
  EtcdLoad load;
  bool seen = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t brace = line.find('{');
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, std::min(brace, space));
    const std::string labels =
        brace == std::string::npos || brace > space ? "" : line.substr(brace, space - brace);
    const double v = std::strtod(line.c_str() + space + 1, nullptr);
    const std::string method = Label(labels, "grpc_method");
    if (name == "grpc_server_handled_total") {
      seen = true;
      if (std::string kind = UnaryKind(method); !kind.empty()) load.counts[kind] += v;
    } else if (name == "grpc_server_msg_received_total") {
      if (method == "LeaseKeepAlive") load.counts["keepalive"] += v;
      if (method == "Watch") load.counts["watch_requests"] += v;
    } else if (name == "grpc_server_msg_sent_total") {
      if (method == "Watch") load.counts["watch_responses"] += v;
    } else if (name == "etcd_debugging_mvcc_events_total") {
      load.counts["watch_events"] += v;
    } else if (name == "etcd_mvcc_db_total_size_in_bytes") {
      seen = true;
      load.db_bytes += v;
    } else if (name == "etcd_mvcc_db_total_size_in_use_in_bytes") {
      load.db_in_use_bytes += v;
    } else if (name == "etcd_debugging_mvcc_compact_revision") {
      load.compacted_revision = std::max(load.compacted_revision, v);
    } else if (name == "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count") {
      load.compactions += v;
    }
  }
  if (!seen)
    return Status::InvalidArgument("not an etcd's /metrics: no grpc_server_handled_total or db size");
  return load;
}

EtcdLoad RatesBetween(const EtcdLoad& before, const EtcdLoad& after, double seconds) {
  EtcdLoad r;
  for (const auto& [kind, v] : after.counts) r.counts[kind] = seconds > 0 ? (v - before[kind]) / seconds : 0;
  r.db_bytes = after.db_bytes;
  r.db_in_use_bytes = after.db_in_use_bytes;
  r.compacted_revision = after.compacted_revision;
  r.compactions = after.compactions;
  return r;
}

std::map<std::string, double> CountsByLabel(const std::string& text, const std::string& metric,
                                            const std::string& label) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(metric + "{", 0) != 0) continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    out[Label(line.substr(metric.size(), space - metric.size()), label)] +=
        std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

EtcdLoad Sum(const EtcdLoad& a, const EtcdLoad& b) {
  EtcdLoad s = a;
  for (const auto& [kind, v] : b.counts) s.counts[kind] += v;
  s.db_bytes += b.db_bytes;
  s.db_in_use_bytes += b.db_in_use_bytes;
  s.compacted_revision = std::max(a.compacted_revision, b.compacted_revision);
  s.compactions = std::max(a.compactions, b.compactions);  // every member compacts the same history
  return s;
}

}  // namespace tessera::bench
