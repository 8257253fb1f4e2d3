// ConsoleServer (see console_server.h).
#include "master/console_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "common/clock.h"
#include "common/http_limits.h"
#include "common/http_probes.h"
#include "common/node_http.h"
#include "common/strings.h"

namespace tessera::master {
namespace {

void Reply(httplib::Response& res, int code, const nlohmann::json& body) {
  res.status = code;
  res.set_header("Cache-Control", "no-store");
  res.set_content(body.dump(), "application/json");
}

void Error(httplib::Response& res, int code, const std::string& message) {
  Reply(res, code, nlohmann::json{{"error", message}});
}

// A non-negative integer query parameter; false (and a 400 sent) if it is malformed.
bool Since(const httplib::Request& req, httplib::Response& res, int64_t* since) {
  *since = 0;
  if (!req.has_param("since")) return true;
  const std::string v = req.get_param_value("since");
  auto parsed = ParseInt64(v, "since");
  if (!parsed.ok() || *parsed < 0) {
    Error(res, 400, "since must be a non-negative integer, not '" + v + "'");
    return false;
  }
  *since = *parsed;
  return true;
}

// A node name as it appears in log file names: "master-0", "pserver-1", "trainer-2", "etcd".
bool SafeNodeName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace

StatusOr<std::vector<std::string>> ReadLogLines(const std::string& path, int64_t since, size_t limit,
                                                int64_t* next) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("no log at " + path);
  std::vector<std::string> out;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    if (n++ < since) continue;
    if (out.size() >= limit) {
      --n;
      break;
    }
    out.push_back(line);
  }
  *next = std::max(since, n);
  return out;
}

ConsoleServer::ConsoleServer(ConsoleSources sources) : s_(std::move(sources)) {}

ConsoleServer::~ConsoleServer() { Stop(); }

nlohmann::json ConsoleServer::Job(const StatusReply& st) const {
  const double elapsed = ((s_.ended_ms > 0 ? s_.ended_ms : WallMillis()) - s_.started_ms) / 1000.0;
  const double total = static_cast<double>(st.tasks()) * std::max(1, st.passes());
  const double done = st.finished() ? total : static_cast<double>(st.pass()) * st.tasks() + st.done();
  const double fraction = total > 0 ? done / total : 0;
  nlohmann::json j = {{"job", s_.job},
                      {"dataset", st.dataset()},
                      {"config", s_.config},
                      {"pass", st.pass() + 1},
                      {"passes", st.passes()},
                      {"finished", st.finished()},
                      {"tasks",
                       {{"total", st.tasks()},
                        {"done", st.done()},
                        {"pending", st.pending()},
                        {"todo", st.todo()},
                        {"failed", st.failed()}}},
                      {"progress", fraction},
                      {"samples", st.samples()},
                      {"samples_per_second", st.samples_per_second()},
                      {"last_cost", st.last_cost()},
                      {"step", st.step()},
                      {"elapsed_seconds", elapsed},
                      {"leader_epoch", st.epoch()},
                      {"archived", s_.ended_ms > 0}};
  j["eta_seconds"] = fraction > 0 && !st.finished() ? nlohmann::json(elapsed * (1 - fraction) / fraction)
                                                    : nlohmann::json(nullptr);
  return j;
}

nlohmann::json ConsoleServer::Nodes() const {
  auto list = nlohmann::json::array();
  const int64_t now = WallMillis();
  for (const auto& n : s_.nodes()) {
    nlohmann::json j = {{"kind", n.kind},
                        {"name", n.name},
                        {"node", n.kind + "-" + n.name},
                        {"address", n.address},
                        {"epoch", n.epoch},
                        {"state", n.state},
                        {"since_ms", n.since_ms},
                        {"last_heartbeat_ms", n.last_seen_ms},
                        {"seconds_since_heartbeat", (now - n.last_seen_ms) / 1000.0},
                        {"restarts", n.restarts}};
    auto history = nlohmann::json::array();
    for (const auto& [state, at] : n.history) history.push_back({{"state", state}, {"at_ms", at}});
    j["history"] = history;
    auto info = nlohmann::json::parse(n.info, nullptr, false);
    if (!info.is_discarded()) j["info"] = info;
    if (n.kind == "pserver" && s_.pserver_extra) {
      auto index = ParseInt64(n.name, "index");
      if (index.ok()) {
        auto extra = s_.pserver_extra(static_cast<int>(*index));
        if (extra.is_object()) j.update(extra);
      }
    }
    list.push_back(std::move(j));
  }
  nlohmann::json out = {{"nodes", list}};
  if (s_.replicas) {
    if (auto r = s_.replicas(); !r.is_null()) out["replicas"] = std::move(r);
  }
  return out;
}

nlohmann::json ConsoleServer::Tasks(const StatusReply& st) const {
  auto failed = nlohmann::json::array();
  for (const auto& f : st.failed_tasks()) {
    failed.push_back(
        {{"id", f.id()}, {"pass", f.pass() + 1}, {"failures", f.failures()}, {"reason", f.reason()}});
  }
  return {{"pass", st.pass() + 1},
          {"counts",
           {{"total", st.tasks()},
            {"done", st.done()},
            {"pending", st.pending()},
            {"todo", st.todo()},
            {"failed", st.failed()}}},
          {"dispatches", st.dispatches()},
          {"duplicates", st.duplicates()},
          {"timeouts", st.timeouts()},
          {"splits", st.splits()},
          {"failures", st.failures()},
          {"failed", failed}};
}

StatusOr<int> ConsoleServer::Start(const std::string& host, int port,
                                   std::shared_ptr<const HttpAccess> access) {
  http_ = std::make_unique<NodeHttp>(std::move(access));
  auto& srv = http_->server();
  // A standby has nothing to show yet: 503, and the page retries.
  auto status = [this](httplib::Response& res) -> std::optional<StatusReply> {
    auto st = s_.status();
    if (st.ok()) return *st;
    Error(res, 503, st.status().message());
    return std::nullopt;
  };
  srv.Get("/api/job", [this, status](const httplib::Request&, httplib::Response& res) {
    if (auto st = status(res)) Reply(res, 200, Job(*st));
  });
  srv.Get("/api/nodes",
          [this](const httplib::Request&, httplib::Response& res) { Reply(res, 200, Nodes()); });
  srv.Get("/api/tasks", [this, status](const httplib::Request&, httplib::Response& res) {
    if (auto st = status(res)) Reply(res, 200, Tasks(*st));
  });
  srv.Get("/api/metrics", [this, status](const httplib::Request& req, httplib::Response& res) {
    int64_t since;
    if (!Since(req, res, &since)) return;
    // Not leading yet (or still restoring the history it took over): nothing to show, not an
    // empty history.
    if (!status(res)) return;
    auto points = s_.cost_since(since);
    auto body = nlohmann::json::parse(CostHistory::ToJson(points));
    for (auto& p : body) p["pass"] = p.value("pass", 0) + 1;  // numbered from 1, as everywhere shown
    Reply(res, 200,
          {{"points", body},
           {"next", points.empty() ? since : points.back().seq},
           {"more", points.size() >= 5000}});
  });
  srv.Get("/api/logs", [this](const httplib::Request& req, httplib::Response& res) {
    int64_t since;
    if (!Since(req, res, &since)) return;
    const std::string node = req.get_param_value("node");
    if (node.empty()) return Error(res, 400, "give the node: /api/logs?node=trainer-0");
    if (s_.log_dir.empty())
      return Error(res, 404, "this master has no log directory (start it with --log-dir)");
    if (!SafeNodeName(node)) return Error(res, 400, "'" + node + "' is not a node name");
    int64_t next = since;
    auto lines = ReadLogLines(s_.log_dir + "/" + node + ".log", since, 1000, &next);
    if (!lines.ok()) return Error(res, 404, "unknown node '" + node + "': no log for it in " + s_.log_dir);
    Reply(res, 200, {{"node", node}, {"lines", *lines}, {"next", next}});
  });
  // Probes (Kubernetes and the launchers): alive while the process answers; ready while it leads,
  // so a Service in front of the masters reaches the leader only.
  AddProbes(srv, [this](std::string* why) {
    auto st = s_.status();
    *why = st.ok() ? "leading" : std::string(st.status().message());
    return st.ok();
  });
  srv.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    if (s_.before_metrics) s_.before_metrics();
    res.set_content(s_.metrics ? s_.metrics->Render() : "", "text/plain; version=0.0.4");
  });
  srv.Get(R"(/api/.*)", [](const httplib::Request& req, httplib::Response& res) {
    Error(res, 404, "no such endpoint: " + req.path);
  });
  // The page: static files built by npm (web/), served as they are.
  if (s_.web_dir.empty() || !srv.set_mount_point("/", s_.web_dir)) {
    srv.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      Error(res, 404,
            "the console page is not installed" + (s_.web_dir.empty() ? std::string() : " at " + s_.web_dir) +
                " (build it with `make build`); the JSON API is at /api/job, /api/nodes, /api/tasks, "
                "/api/metrics, /api/logs");
    });
  }
  srv.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("console: {} failed: {}", req.path, what);
    Error(res, 500, req.path + " failed: " + what);
  });
  return http_->Listen(host, port, "the console");
}

void ConsoleServer::Stop() {
  if (http_) http_->Stop();
}

std::string FindConsolePage(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const auto& dir : {exe.parent_path() / "../console", exe.parent_path() / "../share/tessera/web"}) {
    if (std::filesystem::exists(dir / "index.html", ec))
      return std::filesystem::weakly_canonical(dir, ec).string();
  }
  return "";
}

}  // namespace tessera::master
