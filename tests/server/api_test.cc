// The platform server's API, through a real `tessera server` process on each database backend:
// sign-up, login, the caller, API tokens and their revocation, roles in a namespace, approval,
// the audit log; bad input (malformed JSON, unknown fields, oversized bodies, no token, another
// user's token) answered 4xx with a message and nothing stored; state kept across a SIGKILL.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "harness/raw_http.h"
#include "server/api_fixture.h"

namespace tessera::server {
namespace {

class ApiTest : public ApiFixture {};

TEST_P(ApiTest, AccountsTokensRolesAndAudit) {
  EXPECT_EQ(Call("POST", "/api/v1/signup", R"({"name":"ada","password":"correct horse"})").status, 201);
  EXPECT_EQ(Call("POST", "/api/v1/signup", R"({"name":"bob","password":"battery staple"})").status, 201);
  const std::string ada = Login("ada", "correct horse"), bob = Login("bob", "battery staple");
  Got me = Call("GET", "/api/v1/me", "", bob);
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(me.body["user"]["name"], "bob");
  EXPECT_EQ(me.body["namespaces"][0]["role"], "admin");
  EXPECT_FALSE(me.body["user"]["admin"].get<bool>());

  // An API token works until revoked; only its owner revokes it.
  Got tok = Call("POST", "/api/v1/tokens", R"({"label":"laptop"})", bob);
  ASSERT_EQ(tok.status, 201);
  const std::string api = tok.body["token"], id = tok.body["id"];
  EXPECT_EQ(Call("GET", "/api/v1/me", "", api).status, 200);
  EXPECT_EQ(Call("DELETE", "/api/v1/tokens/" + id, "", ada).status, 404);
  EXPECT_EQ(Call("DELETE", "/api/v1/tokens/" + id, "", bob).status, 204);
  Got revoked = Call("GET", "/api/v1/me", "", api);
  EXPECT_EQ(revoked.status, 401);
  EXPECT_NE(revoked.body["error"]["message"].get<std::string>().find("revoked"), std::string::npos);

  // bob sees nothing of ada's namespace until she makes him a viewer; a viewer may not read the
  // audit log, an admin may.
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/audit", "", bob).status, 404);
  EXPECT_EQ(Call("PUT", "/api/v1/namespaces/ada/members/bob", R"({"role":"viewer"})", bob).status, 404);
  EXPECT_EQ(Call("PUT", "/api/v1/namespaces/ada/members/bob", R"({"role":"viewer"})", ada).status, 200);
  Got denied = Call("GET", "/api/v1/namespaces/ada/audit", "", bob);
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(denied.body["error"]["code"], "permission_denied");
  Got audit = Call("GET", "/api/v1/namespaces/ada/audit", "", ada);
  ASSERT_EQ(audit.status, 200);
  bool saw_denied = false;
  for (const auto& a : audit.body["audit"])
    saw_denied = saw_denied || (a["user"] == "bob" && a["outcome"] == "permission_denied");
  EXPECT_TRUE(saw_denied) << audit.body;
  EXPECT_EQ(Call("POST", "/api/v1/users/bob/approve", "", bob).status, 403);  // not a server administrator

  // The state outlives a SIGKILL.
  server_->Kill();
  StartServer();
  EXPECT_EQ(Call("GET", "/api/v1/me", "", bob).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/me", "", api).status, 401);
}

TEST_P(ApiTest, BadInputIsRefusedAndNothingStored) {
  auto message = [](const Got& g) {
    return g.body.is_object() ? g.body["error"]["message"].get<std::string>() : "";
  };
  Got malformed = Call("POST", "/api/v1/signup", R"({"name":"ada",)");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(message(malformed), "body: not valid JSON");
  Got unknown = Call("POST", "/api/v1/signup", R"({"name":"ada","pasword":"correct horse"})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(message(unknown).find("did you mean 'password'"), std::string::npos) << unknown.body;
  EXPECT_EQ(Call("POST", "/api/v1/signup", R"(["ada"])").status, 400);
  EXPECT_EQ(Call("POST", "/api/v1/signup", R"({"name":"ada","password":12345678})").status, 400);
  EXPECT_EQ(Call("POST", "/api/v1/signup", R"({"name":"../etc","password":"correct horse"})").status, 400);
  // An oversized body: 413 before it is read; the client may see the connection closed while
  // still sending it (status 0) instead. The server goes on either way (the next call).
  const int oversized =
      Call("POST", "/api/v1/signup", Json{{"name", "ada"}, {"password", std::string(2 << 20, 'x')}}.dump())
          .status;
  EXPECT_TRUE(oversized == 413 || oversized == 0) << oversized;
  // None of that made a user: the name is still free.
  EXPECT_EQ(Call("POST", "/api/v1/signup", R"({"name":"ada","password":"correct horse"})").status, 201);
  Got no_token = Call("GET", "/api/v1/me");
  EXPECT_EQ(no_token.status, 401);
  EXPECT_NE(message(no_token).find("Authorization: Bearer"), std::string::npos);
  EXPECT_EQ(Call("GET", "/api/v1/me", "", "tsk_forged").status, 401);
  Got wrong = Call("POST", "/api/v1/login", R"({"name":"ada","password":"wrong horse"})");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(Call("GET", "/api/v1/nothing-here").status, 404);
}

TEST_P(ApiTest, FiftyWrongPasswordsAreSlowedAuditedAndTheRightOneWorksAfterTheDelay) {
  ASSERT_EQ(Call("POST", "/api/v1/signup", R"({"name":"ada","password":"correct horse"})").status, 201);
  ASSERT_EQ(Call("POST", "/api/v1/signup", R"({"name":"bob","password":"battery staple"})").status, 201);
  int checked = 0, throttled = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) {
    Got g = Call("POST", "/api/v1/login", R"({"name":"bob","password":"guess)" + std::to_string(i) + R"("})");
    checked += g.status == 401;
    throttled += g.status == 429;
    ASSERT_TRUE(g.status == 401 || g.status == 429) << g.status << " " << g.body;
    if (g.status == 429) {
      EXPECT_EQ(g.body["error"]["code"], "resource_exhausted") << g.body;
    }
  }
  // 50 tries in a moment: a handful checked (the free ones, then one each wait), the rest refused
  // unread.
  EXPECT_LE(checked, 7) << "in "
                        << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                        << " s";
  EXPECT_GE(throttled, 43);
  // The right password waits too, then works.
  auto h =
      client_->Post("/api/v1/login", R"({"name":"bob","password":"battery staple"})", "application/json");
  ASSERT_TRUE(h);
  ASSERT_EQ(h->status, 429) << h->body;
  const int retry = std::atoi(h->get_header_value("Retry-After").c_str());
  ASSERT_GE(retry, 1) << "no Retry-After";
  ASSERT_LE(retry, 300);
  std::this_thread::sleep_for(std::chrono::seconds(retry));
  const std::string bob = Login("bob", "battery staple");
  EXPECT_FALSE(bob.empty());
  // Another account from elsewhere was never slowed; the address that guessed is, for a while,
  // for any account: ada logs in from the same loopback once bob's success cleared it.
  EXPECT_FALSE(Login("ada", "correct horse").empty());
  // Administrators see every attempt, with where it came from; others may not look.
  const std::string ada = Login("ada", "correct horse");
  Got audit = Call("GET", "/api/v1/audit?action=login", "", ada);
  ASSERT_EQ(audit.status, 200) << audit.body;
  int unauthenticated = 0, refused = 0;
  for (const auto& a : audit.body["audit"]) {
    if (a["target"] != "user bob") continue;
    unauthenticated += a["outcome"] == "unauthenticated";
    refused += a["outcome"] == "throttled";
    EXPECT_EQ(a["detail"], "from 127.0.0.1") << a;
  }
  EXPECT_EQ(unauthenticated, checked);
  EXPECT_EQ(refused, throttled + 1);
  EXPECT_EQ(Call("GET", "/api/v1/audit", "", bob).status, 403);
}

TEST_P(ApiTest, ANamespacesAuditShowsWhatWasDoneToItNotWhatItsMembersDidElsewhere) {
  ASSERT_EQ(Call("POST", "/api/v1/signup", R"({"name":"ada","password":"correct horse"})").status, 201);
  ASSERT_EQ(Call("POST", "/api/v1/signup", R"({"name":"bob","password":"battery staple"})").status, 201);
  const std::string ada = Login("ada", "correct horse"), bob = Login("bob", "battery staple");
  // bob, in his own namespace (a change: audited there).
  Got quota = Call("PUT", "/api/v1/namespaces/bob/members/ada", R"({"role":"viewer"})", bob);
  ASSERT_EQ(quota.status, 200) << quota.body;
  // ada makes him an admin of hers; he acts there too.
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/members/bob", R"({"role":"admin"})", ada).status, 200);
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/members/bob", R"({"role":"member"})", bob).status, 200);
  Got audit = Call("GET", "/api/v1/namespaces/ada/audit", "", ada);
  ASSERT_EQ(audit.status, 200);
  bool in_ada = false;
  for (const auto& a : audit.body["audit"]) {
    EXPECT_EQ(a["target"].get<std::string>().rfind("/api/v1/namespaces/ada", 0), 0u)
        << "ada's audit shows what was done elsewhere: " << a;
    in_ada = in_ada || (a["user"] == "bob" && a["target"] == "/api/v1/namespaces/ada/members/bob");
  }
  EXPECT_TRUE(in_ada) << audit.body;
  Got bobs = Call("GET", "/api/v1/namespaces/bob/audit", "", bob);
  ASSERT_EQ(bobs.status, 200);
  ASSERT_FALSE(bobs.body["audit"].empty());
  for (const auto& a : bobs.body["audit"])
    EXPECT_EQ(a["target"].get<std::string>().rfind("/api/v1/namespaces/bob", 0), 0u) << a;
}

TEST_P(ApiTest, AnOversizedBodyGetsTheDocumentedJsonError) {
  // Declared and not sent: the server answers before reading it.
  const int port = std::stoi(url_.substr(url_.rfind(':') + 1));
  const std::string reply = testing::RawHttpUntilClosed(
      "127.0.0.1", port,
      "POST /api/v1/signup HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000000",
      "");
  ASSERT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Type: application/json"), std::string::npos) << reply;
  const Json body = Json::parse(reply.substr(reply.find("\r\n\r\n") + 4), nullptr, false);
  ASSERT_TRUE(body.is_object()) << reply;
  EXPECT_EQ(body["error"]["code"], "too_large");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("at most 1048576 bytes"), std::string::npos)
      << body;
}

TEST_P(ApiTest, ApprovalWhenRequired) {
  server_->Terminate(std::chrono::seconds(10));
  StartServer({"--require-approval"});
  EXPECT_EQ(Call("POST", "/api/v1/signup", R"({"name":"root","password":"correct horse"})").status, 201);
  EXPECT_EQ(Call("POST", "/api/v1/signup", R"({"name":"eve","password":"battery staple"})").status, 201);
  Got waiting = Call("POST", "/api/v1/login", R"({"name":"eve","password":"battery staple"})");
  EXPECT_EQ(waiting.status, 403);
  const std::string root = Login("root", "correct horse");
  EXPECT_EQ(Call("POST", "/api/v1/users/eve/approve", "", root).status, 204);
  EXPECT_FALSE(Login("eve", "battery staple").empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, ApiTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
