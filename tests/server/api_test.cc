// The platform server's API, through a real `tessera server` process on each database backend:
// sign-up, login, the caller, API tokens and their revocation, roles in a namespace, approval,
// the audit log; bad input (malformed JSON, unknown fields, oversized bodies, no token, another
// user's token) answered 4xx with a message and nothing stored; state kept across a SIGKILL.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <regex>

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
