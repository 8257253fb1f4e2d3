// The master's console API and /metrics against a running `tessera local` job: every JSON
// endpoint answers with what the job is doing (nodes, tasks, cost points, logs), a killed pserver
// shows as lost or restarted, bad requests get a 4xx with a message, and /metrics parses as the
// Prometheus text format.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <map>
#include <regex>
#include <set>

#include "coord/election.h"
#include "coord/keys.h"
#include "harness/job_probe.h"
#include "harness/prometheus_text.h"
#include "local/local_fixture.h"
#include "master/run_history.h"

namespace tessera::testing {
namespace {

struct Got {
  int status = 0;
  nlohmann::json body;
  std::string text;
};

Got Fetch(httplib::Client& c, const std::string& path) {
  Got g;
  auto r = c.Get(path);
  if (!r) return g;
  g.status = r->status;
  g.text = r->body;
  g.body = nlohmann::json::parse(r->body, nullptr, false);
  return g;
}

const nlohmann::json* Node(const nlohmann::json& nodes, const std::string& node) {
  for (const auto& n : nodes["nodes"]) {
    if (n.value("node", "") == node) return &n;
  }
  return nullptr;
}

TEST_F(LocalTest, ConsoleApiAndMetricsDescribeTheRunningJob) {
  UploadFashionMnist();
  Subprocess& p = StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--model-arg",
                              "hidden=32", "--pservers", "2", "--trainers", "2", "--passes", "6", "--job",
                              "web", "--checkpoint-every", "0.5"});
  std::smatch m;
  std::string out;
  ASSERT_TRUE(WaitUntil(
      [&] {
        out = p.Output();
        return std::regex_search(out, m, std::regex("web console: http://([0-9.]+):([0-9]+)/"));
      },
      std::chrono::seconds(60), std::chrono::milliseconds(100)))
      << out;
  httplib::Client c(m[1].str(), std::stoi(m[2].str()));
  c.set_read_timeout(10, 0);

  // Cost points arrive while training runs.
  Got metrics;
  ASSERT_TRUE(WaitUntil(
      [&] {
        metrics = Fetch(c, "/api/metrics?since=0");
        return metrics.status == 200 && metrics.body["points"].size() >= 3;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(200)))
      << metrics.text << p.Output();
  const auto& first = metrics.body["points"][0];
  EXPECT_GE(first["seq"].get<int64_t>(), 1);
  EXPECT_TRUE(first.contains("trainer"));
  EXPECT_GT(first["cost"].get<double>(), 0);
  int64_t next = metrics.body["next"].get<int64_t>();
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto later = Fetch(c, "/api/metrics?since=" + std::to_string(next));
        return later.status == 200 && !later.body["points"].empty() &&
               later.body["points"][0]["seq"].get<int64_t>() > next;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(200)))
      << "no newer points after " << next;

  Got job = Fetch(c, "/api/job");
  ASSERT_EQ(job.status, 200) << job.text;
  EXPECT_EQ(job.body["job"], "web");
  EXPECT_EQ(job.body["dataset"], "fm");
  EXPECT_EQ(job.body["passes"], 6);
  // Fashion-MNIST's 46 chunks of 1 MiB, 4 a task (the master's choice of about 4 MiB a task).
  EXPECT_EQ(job.body["tasks"]["total"], 12);
  EXPECT_EQ(job.body["config"]["mode"], "sync");
  EXPECT_FALSE(job.body["config"].contains("token")) << "the job token must not be shown";
  EXPECT_GT(job.body["elapsed_seconds"].get<double>(), 0);

  Got tasks = Fetch(c, "/api/tasks");
  ASSERT_EQ(tasks.status, 200) << tasks.text;
  EXPECT_EQ(tasks.body["counts"]["total"], 12);
  EXPECT_TRUE(tasks.body["failed"].is_array());

  // Nodes: two pservers and two trainers alive; pserver 1 killed shows as lost, then restarted.
  Got nodes = Fetch(c, "/api/nodes");
  ASSERT_EQ(nodes.status, 200) << nodes.text;
  for (const char* n : {"pserver-0", "pserver-1", "trainer-0", "trainer-1"}) {
    const auto* node = Node(nodes.body, n);
    ASSERT_NE(node, nullptr) << n << " missing: " << nodes.text;
    EXPECT_EQ((*node)["state"], "alive") << nodes.text;
    EXPECT_GT((*node)["epoch"].get<int64_t>(), 0);
  }
  EXPECT_FALSE((*Node(nodes.body, "pserver-0"))["address"].get<std::string>().empty());
  // Checkpoints with their size, and the digest checked by the master (it sees the run's directory).
  ASSERT_TRUE(WaitUntil(
      [&] {
        nodes = Fetch(c, "/api/nodes");
        const auto* ps = Node(nodes.body, "pserver-0");
        return ps && ps->contains("checkpoints") && !(*ps)["checkpoints"].empty();
      },
      std::chrono::seconds(30), std::chrono::milliseconds(200)))
      << nodes.text;
  const auto& newest = (*Node(nodes.body, "pserver-0"))["checkpoints"][0];
  EXPECT_EQ(newest["digest_state"], "verified") << nodes.text;
  EXPECT_GT(newest["bytes"].get<int64_t>(), 0) << nodes.text;
  EXPECT_EQ(newest["digest"].get<std::string>().size(), 64u);
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  int64_t ps = RegisteredPid(etcd.get(), keys::PserverPrefix("web"), "1");
  ASSERT_GT(ps, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(ps), SIGKILL), 0);
  std::set<std::string> seen;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto now = Fetch(c, "/api/nodes");
        const auto* node = now.status == 200 ? Node(now.body, "pserver-1") : nullptr;
        if (node) seen.insert((*node)["state"].get<std::string>());
        return node && (*node)["state"] == "restarted" && (*node)["restarts"].get<int>() >= 1;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(100)))
      << p.Output();
  std::printf("pserver-1 states seen after the kill: %s\n",
              [&] {
                std::string s;
                for (const auto& x : seen) s += x + " ";
                return s;
              }()
                  .c_str());

  // Logs of a trainer; bad requests.
  Got logs = Fetch(c, "/api/logs?node=trainer-0");
  ASSERT_EQ(logs.status, 200) << logs.text;
  ASSERT_FALSE(logs.body["lines"].empty());
  EXPECT_NE(logs.body["lines"][0].get<std::string>().find("trainer"), std::string::npos) << logs.text;
  int64_t log_next = logs.body["next"].get<int64_t>();
  Got tail = Fetch(c, "/api/logs?node=trainer-0&since=" + std::to_string(log_next));
  EXPECT_EQ(tail.status, 200);
  EXPECT_GE(tail.body["next"].get<int64_t>(), log_next);
  for (auto [path, code] :
       {std::pair{"/api/logs?node=trainer-99", 404}, std::pair{"/api/logs?node=../etc/passwd", 400},
        std::pair{"/api/logs", 400}, std::pair{"/api/logs?node=trainer-0&since=x", 400},
        std::pair{"/api/metrics?since=-4", 400}, std::pair{"/api/metrics?since=12abc", 400},
        std::pair{"/api/nope", 404}}) {
    Got bad = Fetch(c, path);
    EXPECT_EQ(bad.status, code) << path << ": " << bad.text;
    EXPECT_TRUE(bad.body.is_object() && bad.body.contains("error")) << path << ": " << bad.text;
  }

  // /metrics parses, with the task gauges and RPC histograms filled in.
  Got prom = Fetch(c, "/metrics");
  ASSERT_EQ(prom.status, 200);
  auto parsed = ParsePrometheus(prom.text);
  ASSERT_EQ(parsed.error, "") << prom.text;
  EXPECT_EQ(parsed.types["tessera_master_rpc_seconds"], "histogram");
  EXPECT_GT(parsed.Value("tessera_master_rpc_seconds_count", {{"method", "GetTask"}}), 0) << prom.text;
  double total = 0;
  for (const char* s : {"todo", "pending", "done", "failed"})
    total += parsed.Value("tessera_master_tasks", {{"state", s}});
  EXPECT_EQ(total, 12) << prom.text;
  EXPECT_GE(parsed.Value("tessera_master_pass"), 1);

  // A pserver's own /metrics (its address is in its registration, shown by /api/nodes).
  Got again = Fetch(c, "/api/nodes");
  const auto* ps0 = Node(again.body, "pserver-0");
  ASSERT_NE(ps0, nullptr);
  std::string url = (*ps0)["info"].value("metrics", "");
  std::smatch u;
  ASSERT_TRUE(std::regex_match(url, u, std::regex("http://([0-9.]+):([0-9]+)/metrics"))) << again.text;
  httplib::Client pc(u[1].str(), std::stoi(u[2].str()));
  auto pr = pc.Get("/metrics");
  ASSERT_TRUE(pr) << url;
  auto pp = ParsePrometheus(pr->body);
  ASSERT_EQ(pp.error, "") << pr->body;
  EXPECT_GT(pp.Value("tessera_pserver_pushes_total"), 0) << pr->body;
  EXPECT_GT(pp.Value("tessera_pserver_pulls_total"), 0) << pr->body;
  EXPECT_GT(pp.Value("tessera_pserver_received_bytes_total"), 0) << pr->body;
  EXPECT_GT(pp.Value("tessera_pserver_version"), 0) << pr->body;
  // What the shard holds, per parameter.
  EXPECT_NE(pr->body.find("tessera_pserver_param_elements{kind=\"dense\",param=\""), std::string::npos)
      << pr->body;
  EXPECT_NE(pr->body.find("tessera_pserver_param_bytes{kind=\"dense\",param=\""), std::string::npos)
      << pr->body;
  EXPECT_GT(pp.Value("tessera_pserver_request_seconds_count", {{"op", "data"}}), 0) << pr->body;
  EXPECT_GT(pp.Value("tessera_pserver_barrier_seconds_count"), 0) << pr->body;
  EXPECT_GT(pp.Value("tessera_pserver_apply_seconds_count"), 0) << pr->body;  // every barrier's update

  // The job still finishes; its evaluations are in the history.
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << p.Output();
  EXPECT_EQ(*code, 0) << p.Output() << LogsTail(30);
}

// Evaluation results are points of the history too, and a new master serves the same history.
TEST_F(LocalTest, ConsoleHistorySurvivesAMasterFailover) {
  UploadFashionMnist();
  Subprocess& p = StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--model-arg",
                              "hidden=32", "--pservers", "1", "--trainers", "1", "--passes", "16", "--job",
                              "hist", "--standby-masters", "1"});
  // 16 passes: the job must outlast pass 1, the history's save and the failover (a pass of this
  // mlp takes well under a second here).
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  auto console = [&]() -> std::pair<std::string, int> {
    auto leader = Election::Leader(etcd.get(), keys::MasterElectionPrefix("hist"));
    if (!leader.ok() || !leader->has_value()) return {"", 0};
    auto j = nlohmann::json::parse((*leader)->value, nullptr, false);
    std::smatch m;
    std::string url = j.is_object() ? j.value("console", "") : "";
    if (!std::regex_match(url, m, std::regex("http://([0-9.]+):([0-9]+)/"))) return {"", 0};
    return {m[1].str(), std::stoi(m[2].str())};
  };
  // Wait for an evaluation point (the end of pass 1) on the first leader.
  std::pair<std::string, int> first;
  nlohmann::json before;
  ASSERT_TRUE(WaitUntil(
      [&] {
        first = console();
        if (first.second == 0) return false;
        httplib::Client c(first.first, first.second);
        auto got = Fetch(c, "/api/metrics?since=0");
        if (got.status != 200) return false;
        for (const auto& pt : got.body["points"]) {
          if (pt.value("metric", "") == "accuracy") {
            before = got.body["points"];
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(200)))
      << p.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the history is saved every 2 s
  auto pids = [&] {
    auto leader = Election::Leader(etcd.get(), keys::MasterElectionPrefix("hist"));
    auto j = nlohmann::json::parse((*leader)->value, nullptr, false);
    return j.value("pid", int64_t{0});
  }();
  ASSERT_GT(pids, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(pids), SIGKILL), 0);
  // The standby leads with another console address, and serves the points the first one had.
  std::pair<std::string, int> second;
  Got after;
  ASSERT_TRUE(WaitUntil(
      [&] {
        second = console();
        if (second.second == 0 || second == first) return false;
        httplib::Client c(second.first, second.second);
        after = Fetch(c, "/api/metrics?since=0");
        return after.status == 200;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(200)))
      << p.Output();
  ASSERT_GE(after.body["points"].size(), before.size()) << after.text;
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after.body["points"][i]["seq"], before[i]["seq"]);
    EXPECT_EQ(after.body["points"][i].value("cost", -1.0), before[i].value("cost", -1.0));
  }
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << p.Output();
  EXPECT_EQ(*code, 0) << p.Output() << LogsTail(30);
  // The run's history file, written by one leader and then the other, holds each point once and
  // every pass's evaluation.
  auto history = master::ReadRunHistory(run() + "/history.jsonl");
  ASSERT_TRUE(history.ok()) << history.status();
  std::set<int64_t> seqs;
  std::map<int, int> accuracy_by_pass;
  for (const auto& pt : history->points) {
    EXPECT_TRUE(seqs.insert(pt.seq).second) << "point " << pt.seq << " written twice";
    if (pt.metric == "accuracy") ++accuracy_by_pass[pt.pass + 1];
  }
  for (int pass = 1; pass <= 16; ++pass) EXPECT_EQ(accuracy_by_pass[pass], 1) << "pass " << pass;
}

// After the job, its run directory holds the console's history, and `tessera console --run`
// serves the finished run: the job, every pass's evaluation, the trainers as finished (not lost),
// the logs.
TEST_F(LocalTest, AFinishedRunsConsoleReopensFromItsRunDirectory) {
  UploadFashionMnist();
  Subprocess& p = StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--model-arg",
                              "hidden=16", "--trainers", "2", "--passes", "3", "--job", "archive"});
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value() && *code == 0) << p.Output() << LogsTail();
  // As training went, one line per point: the evaluations of passes 1..3 are there.
  auto text = ReadFile(run() + "/history.jsonl");
  ASSERT_TRUE(text.ok());
  for (int pass = 1; pass <= 3; ++pass) {
    EXPECT_NE(text->find("\"metric\":\"accuracy\",\"pass\":" + std::to_string(pass)), std::string::npos)
        << "no evaluation of pass " << pass << " in history.jsonl";
  }

  SpawnOptions o;
  o.argv = {BuildPath("src/tessera"), "console", "--run", run()};
  o.log_path = dir_ + "/console.log";
  auto c = Subprocess::Spawn(o);
  ASSERT_TRUE(c.ok());
  std::smatch m;
  std::string out;
  ASSERT_TRUE(WaitUntil(
      [&] {
        out = (*c)->Output();
        return std::regex_search(out, m, std::regex("(http://([0-9.]+):([0-9]+)/)"));
      },
      std::chrono::seconds(30)))
      << out;
  httplib::Client http(m[2].str(), std::stoi(m[3].str()));
  auto job = Fetch(http, "/api/job");
  ASSERT_EQ(job.status, 200) << job.text;
  EXPECT_EQ(job.body["job"], "archive");
  EXPECT_EQ(job.body["finished"], true);
  EXPECT_EQ(job.body["archived"], true);
  EXPECT_EQ(job.body["pass"], 3);
  auto nodes = Fetch(http, "/api/nodes");
  for (const char* t : {"trainer-0", "trainer-1"}) {
    const auto* n = Node(nodes.body, t);
    ASSERT_NE(n, nullptr) << nodes.text;
    EXPECT_EQ((*n)["state"], "finished") << t << " " << nodes.text;
  }
  auto metrics = Fetch(http, "/api/metrics?since=0");
  std::set<int> evaluated;
  for (const auto& pt : metrics.body["points"]) {
    if (pt.value("metric", "") == "accuracy") evaluated.insert(pt["pass"].get<int>());
  }
  EXPECT_EQ(evaluated, (std::set<int>{1, 2, 3})) << metrics.text;
  auto logs = Fetch(http, "/api/logs?node=trainer-0&since=0");
  ASSERT_EQ(logs.status, 200) << logs.text;
  EXPECT_FALSE(logs.body["lines"].empty());
  ASSERT_TRUE((*c)->Signal(SIGINT).ok());
  auto ended = (*c)->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(*ended, 0);
  auto none = Tessera({"console", "--run", dir_});
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.out.find("holds no run history"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace tessera::testing
