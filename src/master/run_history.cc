// RunHistory (see run_history.h).
#include "master/run_history.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/clock.h"

namespace tessera::master {
namespace {

nlohmann::json NodeJson(const NodeView& n) {
  auto history = nlohmann::json::array();
  for (const auto& [state, at] : n.history) history.push_back({{"state", state}, {"at_ms", at}});
  return {{"kind", n.kind},         {"name", n.name},       {"address", n.address},
          {"info", n.info},         {"epoch", n.epoch},     {"state", n.state},
          {"since_ms", n.since_ms}, {"last_seen_ms", n.last_seen_ms}, {"restarts", n.restarts},
          {"history", history}};
}

NodeView NodeFromJson(const nlohmann::json& j) {
  NodeView n;
  n.kind = j.value("kind", "");
  n.name = j.value("name", "");
  n.address = j.value("address", "");
  n.info = j.value("info", "");
  n.epoch = j.value("epoch", int64_t{0});
  n.state = j.value("state", "");
  n.since_ms = j.value("since_ms", int64_t{0});
  n.last_seen_ms = j.value("last_seen_ms", int64_t{0});
  n.restarts = j.value("restarts", 0);
  if (j.contains("history") && j["history"].is_array()) {
    for (const auto& h : j["history"]) n.history.emplace_back(h.value("state", ""), h.value("at_ms", int64_t{0}));
  }
  return n;
}

}  // namespace

StatusOr<std::unique_ptr<RunHistoryWriter>> RunHistoryWriter::Open(const std::string& path) {
  std::unique_ptr<RunHistoryWriter> w(new RunHistoryWriter(path));
  auto before = ReadRunHistory(path);
  if (before.ok()) {
    for (const auto& p : before->points) w->last_seq_ = std::max(w->last_seq_, p.seq);
  }
  w->file_ = std::fopen(path.c_str(), "ae");
  if (!w->file_) return Status::Unavailable("cannot open the history file " + path + ": " + std::strerror(errno));
  return w;
}

RunHistoryWriter::~RunHistoryWriter() {
  if (file_) std::fclose(file_);
}

void RunHistoryWriter::Line(const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    spdlog::warn("cannot append to the history file {}: {}", path_, std::strerror(errno));
  }
}

void RunHistoryWriter::Job(const std::string& job, const nlohmann::json& config) {
  Line({{"type", "job"}, {"time_ms", WallMillis()}, {"job", job}, {"config", config}});
}

void RunHistoryWriter::Points(const std::vector<CostPoint>& points) {
  for (const auto& p : points) {
    if (p.seq <= last_seq_) continue;
    nlohmann::json j = {{"seq", p.seq}, {"time_ms", p.time_ms}, {"step", p.step}, {"pass", p.pass + 1}};
    if (p.metric.empty()) {
      j["type"] = "cost";
      j["trainer"] = p.trainer;
      j["cost"] = p.cost;
    } else {
      j["type"] = "eval";
      j["metric"] = p.metric;
      j["value"] = p.value;
    }
    Line(j);
    last_seq_ = p.seq;
  }
}

void RunHistoryWriter::Nodes(const std::vector<NodeView>& nodes, int64_t now_ms) {
  auto list = nlohmann::json::array();
  for (const auto& n : nodes) list.push_back(NodeJson(n));
  std::string text = list.dump();
  if (text == last_nodes_) return;
  last_nodes_ = text;
  Line({{"type", "nodes"}, {"time_ms", now_ms}, {"nodes", list}});
}

void RunHistoryWriter::Status(const StatusReply& status, int64_t now_ms) {
  std::string text;
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(status, &text, o).ok() || text == last_status_) return;
  last_status_ = text;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded()) Line({{"type", "status"}, {"time_ms", now_ms}, {"status", j}});
}

StatusOr<RunHistory> ReadRunHistory(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("no history file at " + path);
  RunHistory h;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    const std::string type = j.value("type", "");
    const int64_t t = j.value("time_ms", int64_t{0});
    if (t > 0) {
      if (h.first_ms == 0) h.first_ms = t;
      h.last_ms = std::max(h.last_ms, t);
    }
    if (type == "job") {
      h.job = j.value("job", "");
      if (j.contains("config") && j["config"].is_object()) h.config = j["config"];
    } else if (type == "cost" || type == "eval") {
      CostPoint p;
      p.seq = j.value("seq", int64_t{0});
      p.time_ms = t;
      p.step = j.value("step", int64_t{0});
      p.pass = j.value("pass", 1) - 1;
      p.trainer = j.value("trainer", "");
      p.cost = j.value("cost", 0.0);
      p.metric = j.value("metric", "");
      p.value = j.value("value", 0.0);
      h.points.push_back(std::move(p));
    } else if (type == "nodes" && j.contains("nodes") && j["nodes"].is_array()) {
      h.nodes.clear();
      for (const auto& n : j["nodes"]) h.nodes.push_back(NodeFromJson(n));
    } else if (type == "status" && j.contains("status")) {
      StatusReply s;
      if (google::protobuf::util::JsonStringToMessage(j["status"].dump(), &s).ok()) {
        h.status = s;
        h.has_status = true;
      }
    }
  }
  return h;
}

}  // namespace tessera::master
