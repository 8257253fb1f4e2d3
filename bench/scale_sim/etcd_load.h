// EtcdLoad: what an etcd member has served, by kind, read from its /metrics text (etcd 3.4's
// gRPC and MVCC counters): unary requests by method (range, put, txn, delete, lease grant and
// revoke), lease keep-alive messages received, watch messages received (watches created and
// cancelled) and sent (their events), events sent to watchers, the database's size and its
// compactions. Two
// readings give the rates over the time between them. Pure.
#pragma once

#include <map>
#include <string>

#include "tessera/status.h"

namespace tessera::bench {

struct EtcdLoad {
  std::map<std::string, double> counts;  // by kind: "range", "put", "txn", "delete", "lease_grant",
                                         // "lease_revoke", "keepalive", "watch_requests",
                                         // "watch_responses", "watch_events"
  double db_bytes = 0;                   // etcd_mvcc_db_total_size_in_bytes
  double db_in_use_bytes = 0;            // etcd_mvcc_db_total_size_in_use_in_bytes (NaN-free: 0 if absent)
  double compacted_revision = -1;        // etcd_debugging_mvcc_compact_revision (-1: never compacted)
  double compactions = 0;                // compactions done (etcd's compaction duration histogram's count)

  double operator[](const std::string& kind) const {
    auto it = counts.find(kind);
    return it == counts.end() ? 0 : it->second;
  }
  // Every request a client sent (unary requests, keep-alives and watch requests).
  double requests() const;
};

// The load in one /metrics text (summed over every member's text given, for a cluster).
// InvalidArgument when the text has none of etcd's counters (not an etcd's /metrics).
StatusOr<EtcdLoad> ParseEtcdLoad(const std::string& metrics_text);

// What was served between `before` and `after`, per second over `seconds` (the database's size
// is `after`'s).
EtcdLoad RatesBetween(const EtcdLoad& before, const EtcdLoad& after, double seconds);

// `a` + `b`, kind by kind (the members of a cluster).
EtcdLoad Sum(const EtcdLoad& a, const EtcdLoad& b);

// The samples of `metric` in a /metrics text by the value of their label `label` (summed over
// the other labels), e.g. the master's tessera_master_rpc_seconds_count by "method".
std::map<std::string, double> CountsByLabel(const std::string& metrics_text, const std::string& metric,
                                            const std::string& label);

}  // namespace tessera::bench
