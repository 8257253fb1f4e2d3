// docs/openapi.json checked by a third party: Stoplight Prism (npm, pinned in tests/openapi) as a
// validating proxy in front of a real server, and the command line's whole flow run through it
// (sign-up, login, an upload, data sets, sharing, a job submitted, followed, read, scaled, stopped
// and deleted, quotas, tokens, members, the audit logs, the model), plus the API calls the
// command line does not make and a few refusals. Prism checks every request and every answer
// against the document; with --errors it turns any answer the document does not describe (a
// status, a content type, a field, a type) into an error the client sees, and logs it. The test
// fails on any such line and on any command that did not succeed.
//
// Prism is no transparent proxy for binary request bodies: it decodes a body as text and sends it
// on re-encoded (stoplightio/prism#1321, #2349), so a gzip file or a .tar.gz arrives changed. The
// two commands that send binary bodies (an IDX upload, a code package) therefore go to the server
// directly; the same two endpoints are exercised through Prism with bodies that are plain ASCII
// (a text data set's chunk, an uncompressed tar of a text file), which it forwards intact.
#include <unistd.h>

#include "common/digest.h"
#include "common/net.h"
#include "server/cli_fixture.h"

namespace tessera::server {
namespace {

class OpenApiTest : public CliTest {
 protected:
  void SetUp() override {
    prism_ = testing::BuildPath("openapi-npm/node_modules/.bin/prism");
    if (::access(prism_.c_str(), X_OK) != 0)
      GTEST_FAIL() << "Prism is not installed (the openapi_tools target): " << prism_;
    CliTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    server_url_ = url_;
    const int port = FreeLoopbackPort();
    testing::SpawnOptions o;
    o.argv = {prism_,
              "proxy",
              std::string(TESSERA_SOURCE_DIR) + "/docs/openapi.json",
              server_url_,
              "--host",
              "127.0.0.1",
              "--port",
              std::to_string(port),
              "--errors"};
    o.log_path = dir_ + "/prism.log";
    auto p = testing::Subprocess::Spawn(o);
    ASSERT_TRUE(p.ok()) << p.status();
    proxy_ = std::move(*p);
    ASSERT_TRUE(proxy_->WaitForOutput("Prism is listening", std::chrono::seconds(60))) << proxy_->Output();
    // From here on, every call (the command line's and the test's own) goes through the proxy.
    url_ = "http://127.0.0.1:" + std::to_string(port);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    client_->set_read_timeout(60, 0);
  }
  void TearDown() override {
    if (proxy_) proxy_->Terminate(std::chrono::seconds(5));
    CliTest::TearDown();
  }
  // The lines Prism logged about an answer or a request the document does not describe.
  std::string Violations() {
    std::string out;
    for (const auto& line : Split(proxy_ ? proxy_->Output() : "", '\n'))
      if (line.find("iolation") != std::string::npos || line.find("[ERROR]") != std::string::npos ||
          line.find("✖") != std::string::npos)
        out += line + "\n";
    return out;
  }
  // Runs `steps` with the command line talking to the server itself, not through Prism.
  void Direct(const std::function<void()>& steps) {
    const std::string proxy = url_;
    url_ = server_url_;
    steps();
    url_ = proxy;
  }
  void Ok(const std::vector<std::string>& args, const std::string& stdin_text = "") {
    Ran r = Cli(args, stdin_text, 300);
    EXPECT_EQ(r.code, 0) << "tessera " << Join(args, " ") << ":\n" << r.out << "\nPrism:\n" << Violations();
  }
  std::string prism_, server_url_;
  std::unique_ptr<testing::Subprocess> proxy_;
};

TEST_P(OpenApiTest, EveryAnswerOfTheWholeFlowIsOneTheDocumentDescribes) {
  // Accounts.
  Ok({"signup", "--password-stdin", "ada"}, "correct horse");
  Ok({"login", "--password-stdin", "ada"}, "correct horse");
  const std::string ada = Token();
  const std::string bob = SignUpAndLogin("bob", "battery staple");
  Got tok = Call("POST", "/api/v1/tokens", R"({"label":"ci"})", ada);
  EXPECT_EQ(tok.status, 201) << tok.body;
  EXPECT_EQ(Call("GET", "/api/v1/tokens", "", ada).status, 200);
  EXPECT_EQ(Call("DELETE", "/api/v1/tokens/" + tok.body.value("id", ""), "", ada).status, 204);
  EXPECT_EQ(Call("GET", "/api/v1/me", "", ada).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/users", "", ada).status, 200);
  EXPECT_EQ(Call("PUT", "/api/v1/namespaces/ada/members/bob", R"({"role":"viewer"})", ada).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/members", "", ada).status, 200);
  EXPECT_EQ(Call("DELETE", "/api/v1/namespaces/ada/members/bob", "", ada).status, 204);

  // Data: an upload in chunks (binary: straight to the server; an ASCII one through Prism), the
  // listing, a look inside, a share, an abandoned upload.
  Direct([&] { UploadFm(); });
  const std::string lines = "one line\nand another\n";
  Got text = Call(
      "POST", "/api/v1/namespaces/ada/uploads",
      Json{{"name", "lines"}, {"format", "text"}, {"files", {{"input", {{"size", lines.size()}}}}}}.dump(),
      ada);
  ASSERT_EQ(text.status, 201) << text.body << Violations();
  EXPECT_EQ(Call("PUT", "/api/v1/uploads/" + text.body.value("id", "") + "/files/input?offset=0", lines, ada,
                 {{"X-Chunk-SHA256", Sha256Hex(lines)}}, "application/octet-stream")
                .status,
            200)
      << Violations();
  EXPECT_EQ(Call("POST", "/api/v1/uploads/" + text.body.value("id", "") + "/finish", "", ada).status, 202);
  EXPECT_EQ(Call("GET", "/api/v1/uploads/" + text.body.value("id", ""), "", ada).status, 200);
  Ok({"datasets", "ls"});
  Ok({"datasets", "show", "fm"});
  Ok({"datasets", "share", "fm", "bob"});
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/bob/datasets", "", bob).status, 200);
  Got up = Call("POST", "/api/v1/namespaces/ada/uploads",
                R"({"name":"later","format":"text","files":{"input":{"size":5}}})", ada);
  EXPECT_EQ(up.status, 201) << up.body;
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/uploads", "", ada).status, 200);
  EXPECT_EQ(Call("DELETE", "/api/v1/uploads/" + up.body.value("id", ""), "", ada).status, 204);

  // A built-in job, followed to its end; its history, logs and model.
  Ran run = Cli({"submit", "--model", "mlp", "--dataset", "fm", "--passes", "2", "--wait"}, "", 300);
  EXPECT_EQ(run.code, 0) << run.out << Violations();
  const std::string id = JobId(run.out);
  ASSERT_FALSE(id.empty()) << run.out;
  Ok({"jobs"});
  Ok({"jobs", id, "--json"});
  Ok({"metrics", id});
  Ok({"logs", id, "--list"});
  Ok({"logs", id, "trainer-0", "--tail", "5"});
  Ok({"logs", id, "-f"});
  Ok({"quota"});
  auto model = client_->Get("/api/v1/jobs/" + id + "/model", {{"Authorization", "Bearer " + ada}});
  ASSERT_TRUE(model);
  EXPECT_EQ(model->status, 200);
  EXPECT_GT(model->body.size(), 1000u);

  // A code package through Prism (a plain tar of a text file: ASCII), then a job of code (a
  // .tar.gz: straight to the server) that is scaled, stopped and deleted.
  cwd_ = dir_ + "/code";
  std::filesystem::create_directories(cwd_);
  std::ofstream(cwd_ + "/wait.py") << "import time\ntime.sleep(600)\n";
  ASSERT_EQ(std::system(("tar -C " + cwd_ + " -cf " + dir_ + "/plain.tar wait.py").c_str()), 0);
  const std::string plain = ReadFile(dir_ + "/plain.tar").value_or("");
  EXPECT_EQ(Call("PUT", "/api/v1/namespaces/ada/packages/" + Sha256Hex(plain), plain, ada, {},
                 "application/octet-stream")
                .status,
            201)
      << Violations();
  Ran code;
  Direct([&] {
    code = Cli(
        {"submit", "--dataset", "fm", "--trainers", "2", "--trainers-min", "1", "--", "python3", "wait.py"});
  });
  EXPECT_EQ(code.code, 0) << code.out << Violations();
  const std::string waiting = JobId(code.out);
  ASSERT_TRUE(WaitJob(
      waiting, [](const Json& j) { return j.value("state", "") == "running"; }, 120));
  Ok({"scale", waiting, "1"});
  Ok({"stop", waiting});
  ASSERT_TRUE(WaitJob(
      waiting, [](const Json& j) { return j.value("ended_ms", Json()).is_number(); }, 120));
  Ok({"delete", waiting});

  // Quotas and the audit logs.
  EXPECT_EQ(Call("PUT", "/api/v1/namespaces/bob/quota", R"({"jobs":2,"storage_mb":100})", ada).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/bob/quota", "", bob).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/audit", "", ada).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/audit?action=login", "", ada).status, 200);

  // Refusals are the documented errors too.
  EXPECT_EQ(Call("GET", "/api/v1/jobs/ada-00000000", "", ada).status, 404);
  // (A body the document forbids is answered by Prism itself, 422: not the server's to describe.)
  EXPECT_EQ(Call("POST", "/api/v1/namespaces/ada/jobs", R"({"model":"mlp","dataset":"nope"})", ada).status,
            404);
  EXPECT_EQ(
      Call("POST", "/api/v1/namespaces/ada/jobs", R"({"model":"mlp","dataset":"fm","passes":0})", ada).status,
      400);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/audit", "", bob).status, 404);
  EXPECT_EQ(Call("POST", "/api/v1/login", R"({"name":"ada","password":"wrong"})").status, 401);

  Ok({"logout"});
  const std::string v = Violations();
  EXPECT_TRUE(v.empty()) << "answers the document does not describe:\n" << v;
}

INSTANTIATE_TEST_SUITE_P(Backends, OpenApiTest, ::testing::Values("sqlite"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
