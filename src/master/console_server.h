// ConsoleServer: the leading master's HTTP server for the web console: the JSON API behind the
// page (docs/console-api.md) and Prometheus metrics at /metrics. It reads through ConsoleSources
// (the master service, the node history, etcd) and never changes anything.
//
// Bad requests (unknown node, malformed `since`) get a 4xx with {"error": "..."}.
// Thread-safe: handlers run on the server's threads; Start/Stop from the owner.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/http_access.h"
#include "common/metrics.h"
#include "master/console_state.h"
#include "tessera/master.pb.h"
#include "tessera/status.h"

namespace httplib {
class Server;
}

namespace tessera {
class NodeHttp;
}

namespace tessera::master {

struct ConsoleSources {
  std::string job;
  nlohmann::json config;                          // the job configuration, as shown
  std::function<StatusOr<StatusReply>()> status;  // Unavailable on a standby
  std::function<std::vector<CostPoint>(int64_t since)> cost_since;
  std::function<std::vector<NodeView>()> nodes;
  // Per pserver index: its checkpoint records and readiness, from etcd (may be null).
  std::function<nlohmann::json(int index)> pserver_extra;
  // A replicated or elastic job's hosts, shards and their recent changes (ReplicaTracker::View;
  // may be null, or return null).
  std::function<nlohmann::json()> replicas;
  std::string log_dir;  // where <node>.log files are (empty: no logs panel)
  std::string web_dir;  // the page's files (index.html, ...); empty: no page, the API only
  metrics::Registry* metrics = nullptr;
  std::function<void()> before_metrics;  // refreshes gauges before /metrics renders
  int64_t started_ms = 0;
  int64_t ended_ms = 0;  // a run reopened after it ended (`tessera console --run`); 0: running
};

class ConsoleServer {
 public:
  explicit ConsoleServer(ConsoleSources sources);
  ~ConsoleServer();

  // Listens on host:port (0: any free port); returns the port.
  // `access`: who may use it (common/http_access.h; null: everyone).
  StatusOr<int> Start(const std::string& host, int port, std::shared_ptr<const HttpAccess> access = nullptr);
  void Stop();

 private:
  nlohmann::json Job(const StatusReply& st) const;
  nlohmann::json Nodes() const;
  nlohmann::json Tasks(const StatusReply& st) const;

  ConsoleSources s_;
  std::unique_ptr<NodeHttp> http_;
};

// Where the console page is: `given`, or beside this program (a build tree's console/, or an
// install's share/tessera/web); "" if none is found.
std::string FindConsolePage(const std::string& given);

// Reads the lines of `path` from line `since` (0-based), at most `limit`; sets *next to the line
// number after the last one returned. NotFound if the file does not exist.
StatusOr<std::vector<std::string>> ReadLogLines(const std::string& path, int64_t since, size_t limit,
                                                int64_t* next);

}  // namespace tessera::master
