// RunHistory: what the console shows of a job, kept in a file as JSON lines while the job runs,
// so the metrics stay with the run and its console can be reopened after the job ended
// (`tessera console --run DIR`). `tessera local` keeps it at RUN/history.jsonl.
//
// One JSON object per line, each with a "type":
//   {"type":"job", "job": J, "config": {...}}                       first line of each leader
//   {"type":"cost", "seq": N, "time_ms": T, "trainer": "0", "step": S, "pass": P, "cost": C}
//   {"type":"eval", "seq": N, "time_ms": T, "step": S, "pass": P, "metric": "accuracy", "value": V}
//   {"type":"nodes", "time_ms": T, "nodes": [{"kind", "name", "state", "epoch", "history", ...}]}
//   {"type":"status", "time_ms": T, "status": {...}}               the master's status now and then
// Passes are numbered from 1, as everywhere a person reads them. Cost and evaluation points carry
// the master's sequence number: a master that takes over (and appends to the same file) writes
// only points past the last one there, so none is written twice.
//
// The writer is used by the leading master's thread that saves its state; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "master/console_state.h"
#include "tessera/master.pb.h"
#include "tessera/status.h"

namespace tessera::master {

class RunHistoryWriter {
 public:
  // Opens `path` for appending (creating it), after reading the last point's seq in it.
  static StatusOr<std::unique_ptr<RunHistoryWriter>> Open(const std::string& path);
  ~RunHistoryWriter();

  void Job(const std::string& job, const nlohmann::json& config);
  // Appends the points past the last one written (in seq order).
  void Points(const std::vector<CostPoint>& points);
  // Appends the nodes when they differ from the last ones written.
  void Nodes(const std::vector<NodeView>& nodes, int64_t now_ms);
  void Status(const StatusReply& status, int64_t now_ms);
  int64_t last_seq() const { return last_seq_; }

 private:
  explicit RunHistoryWriter(std::string path) : path_(std::move(path)) {}
  void Line(const nlohmann::json& j);

  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t last_seq_ = 0;
  std::string last_nodes_;
  std::string last_status_;
};

// A run's history read back: every point, the last nodes and status written.
struct RunHistory {
  std::string job;
  nlohmann::json config = nlohmann::json::object();
  std::vector<CostPoint> points;  // passes 0-based, as inside the master
  std::vector<NodeView> nodes;
  StatusReply status;
  bool has_status = false;
  int64_t first_ms = 0, last_ms = 0;  // times of the first and last lines
};

// NotFound if there is no file; lines that cannot be read are skipped (a run killed mid-line).
StatusOr<RunHistory> ReadRunHistory(const std::string& path);

}  // namespace tessera::master
