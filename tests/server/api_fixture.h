// ApiFixture: a real `tessera server` process on each database backend (SQLite in the test's
// directory, or a PostgreSQL the test starts), and a JSON client for its API.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/cgroup.h"
#include "common/digest.h"
#include "common/files.h"
#include "harness/cgroups.h"
#include "harness/processes.h"
#include "harness/wait.h"
#include "server/db_fixture.h"

namespace tessera::server {

using Json = nlohmann::json;

class ApiFixture : public DatabaseTest {
 protected:
  void SetUp() override {
    // The server answers an oversized body 413 and closes before reading it: the client's write
    // then fails (EPIPE) instead of ending the test.
    ::signal(SIGPIPE, SIG_IGN);
    DatabaseTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    db_.reset();  // the server opens its own connection
    where_ = GetParam() == "sqlite" ? std::string() : pg_->Url();
    StartServer();
  }
  void TearDown() override {
    if (server_) server_->Terminate(std::chrono::seconds(10));
    // Jobs outlive their server by design: whatever the test's jobs left runs no more, and their
    // control groups go.
    for (const auto& p : testing::ProcessesWith(dir_ + "/server/jobs/")) {
      const pid_t pid = std::atoi(p.c_str());
      if (pid > 0) ::kill(pid, SIGKILL);
    }
    std::error_code ec;
    const CgroupLayout layout = CgroupLayout::Detect();
    for (const auto& job : std::filesystem::directory_iterator(dir_ + "/server/jobs", ec)) {
      for (bool limits : {true, false}) {
        auto g = Cgroup::Open(layout, "tessera-job-" + job.path().filename().string(), limits);
        if (!g.ok()) continue;
        EXPECT_TRUE((*g)->Kill(std::chrono::seconds(10)).ok());
        EXPECT_TRUE((*g)->Remove().ok());
      }
    }
    DatabaseTest::TearDown();
  }

  // What a suite's server is started with, besides the data directory and database. Jobs run in
  // sandboxes where they can (root, bubblewrap, control groups); elsewhere as the server's user.
  virtual std::vector<std::string> ServerArgs() {
    static const bool sandboxes = testing::SandboxesUnavailable().empty();
    return sandboxes ? std::vector<std::string>{} : std::vector<std::string>{"--sandbox", "off"};
  }
  virtual std::map<std::string, std::string> ServerEnv() { return {}; }

  void StartServer(std::vector<std::string> extra = {}) {
    testing::SpawnOptions o;
    o.argv = {testing::BuildPath("src/tessera"), "server", "--port", "0"};
    o.argv.insert(o.argv.end(), {"--data-dir", dir_ + "/server"});
    if (!where_.empty()) o.argv.insert(o.argv.end(), {"--database", where_});
    for (const auto& a : ServerArgs()) o.argv.push_back(a);
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.env = ServerEnv();
    o.log_path = dir_ + "/server-" + std::to_string(starts_++) + ".log";  // a new log: a new port to read
    auto p = testing::Subprocess::Spawn(o);
    ASSERT_TRUE(p.ok());
    server_ = std::move(*p);
    ASSERT_TRUE(server_->WaitForOutput("API at http", std::chrono::seconds(30))) << server_->Output();
    std::smatch m;
    const std::string out = server_->Output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("API at (https?)://127.0.0.1:([0-9]+)/api/v1")));
    const int port = std::stoi(m[2]);
    url_ = m[1].str() + "://127.0.0.1:" + std::to_string(port);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    client_->set_read_timeout(30, 0);
  }

  // The processes of job `id`: its control group's (sandboxed), or those naming its directory.
  std::vector<pid_t> JobPids(const std::string& id) {
    std::vector<pid_t> out;
    auto g = Cgroup::Open(CgroupLayout::Detect(), "tessera-job-" + id, false);
    if (g.ok()) return (*g)->Pids();
    for (const auto& p : testing::ProcessesWith(dir_ + "/server/jobs/" + id))
      out.push_back(std::atoi(p.c_str()));
    return out;
  }

  struct Got {
    int status = 0;
    Json body;
  };
  Got Call(const std::string& method, const std::string& path, const std::string& body = "",
           const std::string& token = "", httplib::Headers h = {},
           const std::string& content_type = "application/json") {
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    httplib::Result r = method == "GET"      ? client_->Get(path, h)
                        : method == "DELETE" ? client_->Delete(path, h)
                        : method == "PUT"    ? client_->Put(path, h, body, content_type)
                                             : client_->Post(path, h, body, content_type);
    if (!r) return {};
    Got g{r->status, Json()};
    if (!r->body.empty()) g.body = Json::parse(r->body, nullptr, false);
    return g;
  }
  // Signs up (when `signup`) and logs in; returns the session token.
  std::string SignUpAndLogin(const std::string& name, const std::string& pw) {
    Got g = Call("POST", "/api/v1/signup", Json{{"name", name}, {"password", pw}}.dump());
    EXPECT_EQ(g.status, 201) << g.body;
    return Login(name, pw);
  }
  std::string Login(const std::string& name, const std::string& pw) {
    Got g = Call("POST", "/api/v1/login", Json{{"name", name}, {"password", pw}}.dump());
    EXPECT_EQ(g.status, 200) << g.body;
    return g.body.value("token", "");
  }

  // Uploads the Fashion-MNIST test set (10,000 images) as data set 'fm' of namespace ada.
  void UploadFashionTest(const std::string& token_) {
    auto images = ReadFile("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz");
    auto labels = ReadFile("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
    ASSERT_TRUE(images.ok() && labels.ok()) << "dataset-fashion-mnist is not installed";
    Got up =
        Call("POST", "/api/v1/namespaces/ada/uploads",
             Json{{"name", "fm"},
                  {"format", "idx"},
                  {"files", {{"images", {{"size", images->size()}}}, {"labels", {{"size", labels->size()}}}}}}
                 .dump(),
             token_);
    ASSERT_EQ(up.status, 201) << up.body;
    const std::string id = up.body["id"];
    for (const auto& [file, data] :
         {std::pair<std::string, std::string>{"images", *images}, {"labels", *labels}})
      for (size_t off = 0; off < data.size(); off += 4 << 20) {
        const std::string piece = data.substr(off, 4 << 20);
        ASSERT_EQ(Call("PUT", "/api/v1/uploads/" + id + "/files/" + file + "?offset=" + std::to_string(off),
                       piece, token_, {{"X-Chunk-SHA256", Sha256Hex(piece)}})
                      .status,
                  200);
      }
    ASSERT_EQ(Call("POST", "/api/v1/uploads/" + id + "/finish", "", token_).status, 202);
    ASSERT_TRUE(testing::WaitUntil(
        [&] { return Call("GET", "/api/v1/uploads/" + id, "", token_).body.value("state", "") == "done"; },
        std::chrono::seconds(60)));
  }

  std::string where_;
  std::string url_;  // the running server's, http://127.0.0.1:PORT
  int starts_ = 0;
  std::unique_ptr<testing::Subprocess> server_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace tessera::server
