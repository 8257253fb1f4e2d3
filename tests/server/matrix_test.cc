// The role x endpoint matrix, driven by docs/openapi.json: every operation there is called by
// every kind of caller — no token, a forged token, a user with no role in the namespace, a
// viewer, a member, an admin, a server administrator — against a real server on each database
// backend. Callers below the operation's x-tessera-role are refused (401 without a valid token,
// 404 outside the namespace, 403 inside it); callers at or above it get past the permission
// check. And the file lists exactly the routes the server has.
#include <filesystem>
#include <fstream>
#include <map>

#include "common/digest.h"
#include "common/files.h"
#include "harness/wait.h"
#include "server/api_fixture.h"
#include "server/api_server.h"

namespace tessera::server {
namespace {

Json OpenApi() {
  std::ifstream f(std::string(TESSERA_SOURCE_DIR) + "/docs/openapi.json");
  return Json::parse(f, nullptr, false);
}

// The least-to-most order of the roles a caller can have in a namespace.
const std::vector<std::string> kLadder = {"none", "viewer", "member", "admin", "server-admin"};

int Rank(const std::string& role) {
  for (size_t i = 0; i < kLadder.size(); ++i)
    if (kLadder[i] == role) return static_cast<int>(i);
  return -1;
}

// Every JSON answer the document lists says what it holds: a schema with its fields (or a
// reference to one), not a bare "type: object" no validator could check. Errors share one.
TEST(OpenApi, EveryJsonAnswerHasASchemaWithItsFields) {
  Json doc = OpenApi();
  ASSERT_FALSE(doc.is_discarded());
  int answers = 0;
  for (const auto& [path, methods] : doc["paths"].items())
    for (const auto& [method, op] : methods.items())
      for (const auto& [code, answer] : op["responses"].items()) {
        if (!answer.contains("content") || !answer["content"].contains("application/json")) continue;
        const Json& schema = answer["content"]["application/json"]["schema"];
        ++answers;
        EXPECT_TRUE(schema.contains("$ref") || schema.contains("properties"))
            << method << " " << path << " " << code << ": " << schema.dump();
      }
  EXPECT_GE(answers, 30);
  for (const auto& [name, schema] : doc["components"]["schemas"].items())
    EXPECT_TRUE(schema.contains("properties") || schema.contains("enum")) << name;
}

// Every route the server registers appears in docs/openapi.json, and every operation there is
// a route of the server (same method; the documented path, its parameters filled in, matches
// the route's pattern).
TEST(OpenApi, ListsExactlyTheServersRoutes) {
  Json doc = OpenApi();
  ASSERT_FALSE(doc.is_discarded()) << "docs/openapi.json is not JSON";
  auto dir = MakeTempDir("tessera-openapi-");
  ASSERT_TRUE(dir.ok());
  auto db = OpenDatabase(*dir + "/server.db");
  ASSERT_TRUE(db.ok()) << db.status();
  ServerOptions o;
  o.data_dir = *dir;
  ApiServer api(db->get(), o);
  // One sample value per path parameter.
  const std::map<std::string, std::string> sample = {
      {"namespace", "ada"},  {"user", "bob"},        {"name", "fm"},
      {"other", "eve"},      {"id", "ada-0123abcd"}, {"upload", "01234567-89ab-cdef-0123-456789abcdef"},
      {"file", "input"},     {"node", "trainer-0"},  {"sha256", std::string(64, 'a')},
      {"token", "0123-abcd"}};
  std::set<size_t> matched;
  int operations = 0;
  for (const auto& [path, methods] : doc["paths"].items()) {
    std::string url = path;
    for (const auto& [k, v] : sample) {
      for (size_t at; (at = url.find("{" + k + "}")) != std::string::npos;) url.replace(at, k.size() + 2, v);
    }
    ASSERT_EQ(url.find('{'), std::string::npos) << "a parameter without a sample value: " << path;
    for (const auto& [method, op] : methods.items()) {
      ++operations;
      std::string m = method;
      for (auto& c : m) c = static_cast<char>(std::toupper(c));
      bool found = false;
      for (size_t i = 0; i < api.routes().size(); ++i) {
        const auto& [rm, pattern] = api.routes()[i];
        if (rm == m && std::regex_match(url, std::regex(pattern))) {
          found = true;
          matched.insert(i);
        }
      }
      EXPECT_TRUE(found) << m << " " << path << " is documented but not served";
      EXPECT_GE(Rank(op.value("x-tessera-role", "?")) +
                    (op.value("x-tessera-role", "") == "user" || op.value("x-tessera-role", "") == "anyone"),
                0)
          << m << " " << path << ": x-tessera-role is not a role";
    }
  }
  for (size_t i = 0; i < api.routes().size(); ++i)
    EXPECT_TRUE(matched.count(i)) << api.routes()[i].first << " " << api.routes()[i].second
                                  << " is served but not in docs/openapi.json";
  EXPECT_EQ(operations, static_cast<int>(api.routes().size()));
  (void)RemoveAll(*dir);
}

class MatrixTest : public ApiFixture {
 protected:
  void SetUp() override {
    ApiFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The first user administers the server; ada owns the namespace under test.
    tokens_["server-admin"] = SignUpAndLogin("root", "correct horse");
    tokens_["admin"] = SignUpAndLogin("ada", "correct horse");
    tokens_["none"] = SignUpAndLogin("eve", "correct horse");
    for (const std::string role : {"viewer", "member"}) {
      const std::string name = role == "viewer" ? "vic" : "mem";
      tokens_[role] = SignUpAndLogin(name, "correct horse");
      ASSERT_EQ(
          Call("PUT", "/api/v1/namespaces/ada/members/" + name, Json{{"role", role}}.dump(), tokens_["admin"])
              .status,
          200);
    }
    SignUpAndLogin("pat", "correct horse");  // the user whose membership the member routes change
    ASSERT_EQ(
        Call("PUT", "/api/v1/namespaces/ada/members/pat", R"({"role": "viewer"})", tokens_["admin"]).status,
        200);
    UploadFashionTest(tokens_["admin"]);
    UploadText("junk");
    // An upload left open, a code package, an API token of ada's, and a running job.
    Got up =
        Call("POST", "/api/v1/namespaces/ada/uploads",
             R"({"name": "open", "format": "text", "files": {"input": {"size": 10}}})", tokens_["admin"]);
    ASSERT_EQ(up.status, 201) << up.body;
    values_["upload"] = up.body["id"];
    Got tok = Call("POST", "/api/v1/tokens", "{}", tokens_["admin"]);
    ASSERT_EQ(tok.status, 201);
    values_["token"] = tok.body["id"];
    Got job = Call("POST", "/api/v1/namespaces/ada/jobs",
                   R"({"model": "mlp", "dataset": "fm", "passes": 1000, "trainers": 2, "trainers_min": 1})",
                   tokens_["admin"]);
    ASSERT_EQ(job.status, 201) << job.body;
    values_["id"] = job.body["id"];
    ASSERT_TRUE(testing::WaitUntil(
        [&] {
          Got l = Call("GET", "/api/v1/jobs/" + values_["id"] + "/logs", "", tokens_["admin"]);
          return Call("GET", "/api/v1/jobs/" + values_["id"], "", tokens_["admin"]).body.value("state", "") ==
                     "running" &&
                 !l.body.value("logs", Json::array()).empty();
        },
        std::chrono::seconds(120), std::chrono::milliseconds(300)));
    values_["namespace"] = "ada";
    values_["user"] = "pat";
    values_["name"] = "fm";
    values_["other"] = "eve";
    values_["file"] = "input";
    values_["node"] = "supervisor";
    values_["sha256"] = std::string(64, 'a');
  }
  // A small data set in ada's namespace, through the API.
  void UploadText(const std::string& name) {
    const std::string data = "1 2 3\n4 5 6\n";
    Got up =
        Call("POST", "/api/v1/namespaces/ada/uploads",
             Json{{"name", name}, {"format", "text"}, {"files", {{"input", {{"size", data.size()}}}}}}.dump(),
             tokens_["admin"]);
    ASSERT_EQ(up.status, 201) << up.body;
    const std::string id = up.body["id"];
    ASSERT_EQ(Call("PUT", "/api/v1/uploads/" + id + "/files/input?offset=0", data, tokens_["admin"],
                   {{"X-Chunk-SHA256", Sha256Hex(data)}})
                  .status,
              200);
    ASSERT_EQ(Call("POST", "/api/v1/uploads/" + id + "/finish", "", tokens_["admin"]).status, 202);
    ASSERT_TRUE(testing::WaitUntil(
        [&] {
          return Call("GET", "/api/v1/uploads/" + id, "", tokens_["admin"]).body.value("state", "") == "done";
        },
        std::chrono::seconds(60)));
  }
  // The status of a followed log's answer, without waiting for the stream to end.
  int FollowStatus(const std::string& url, const std::string& token) {
    int status = 0;
    httplib::Headers h = {{"Authorization", "Bearer " + token}};
    client_->Get(
        url, h,
        [&](const httplib::Response& r) {
          status = r.status;
          return false;
        },
        [](const char*, size_t) { return false; });
    return status;
  }
  std::string Url(const std::string& path, const std::string& op_id) {
    std::map<std::string, std::string> v = values_;
    if (op_id == "deleteDataset") v["name"] = "junk";  // fm stays for the job and the other calls
    std::string url = path;
    for (const auto& [k, x] : v)
      for (size_t at; (at = url.find("{" + k + "}")) != std::string::npos;) url.replace(at, k.size() + 2, x);
    return url;
  }
  std::map<std::string, std::string> tokens_, values_;
};

TEST_P(MatrixTest, EveryOperationRefusesEveryCallerBelowItsRoleAndAdmitsTheRest) {
  Json doc = OpenApi();
  ASSERT_FALSE(doc.is_discarded());
  struct Op {
    std::string method, path, id, role;
  };
  std::vector<Op> ops;
  for (const auto& [path, methods] : doc["paths"].items())
    for (const auto& [method, op] : methods.items())
      ops.push_back({method, path, op.value("operationId", ""), op.value("x-tessera-role", "")});
  // The calls that end or remove something come last, in this order.
  const std::vector<std::string> last = {"scaleJob",    "stopJob",      "deleteJob",      "abortUpload",
                                         "revokeToken", "removeMember", "unshareDataset", "deleteDataset"};
  auto order = [&](const Op& o) {
    for (size_t i = 0; i < last.size(); ++i)
      if (last[i] == o.id) return static_cast<int>(i) + 1;
    return 0;
  };
  std::stable_sort(ops.begin(), ops.end(), [&](const Op& a, const Op& b) { return order(a) < order(b); });
  ASSERT_EQ(ops.size(), 39u);
  int checked = 0;
  for (const Op& op : ops) {
    std::string m = op.method;
    for (auto& c : m) c = static_cast<char>(std::toupper(c));
    const std::string url = Url(op.path, op.id);
    // A stopped job must have ended before it can be deleted.
    if (op.id == "deleteJob") {
      ASSERT_TRUE(testing::WaitUntil(
          [&] { return !Call("GET", url, "", tokens_["admin"]).body.value("ended_ms", Json()).is_null(); },
          std::chrono::seconds(90), std::chrono::milliseconds(300)));
    }
    const std::string what = m + " " + url + " (" + op.id + ", needs " + op.role + ")";
    if (op.role == "anyone") {
      Got g = Call(m, url, "{}", "");
      EXPECT_EQ(g.status, 400) << what << ": " << g.body;  // past any token check, to the body's
      ++checked;
      continue;
    }
    for (const std::string bad : {"", "forged-token"}) {
      Got g = Call(m, url, "{}", bad);
      EXPECT_EQ(g.status, 401) << what << " with token '" << bad << "': " << g.body;
      ++checked;
    }
    if (op.role == "user") {
      // Any user, for themselves: ada (whose token {token} is); another user's token is not found.
      if (op.id == "revokeToken") {
        EXPECT_EQ(Call(m, url, "", tokens_["none"]).status, 404) << what;
      }
      Got g = Call(m, url, "{}", tokens_["admin"]);
      EXPECT_TRUE(g.status >= 200 && g.status < 300) << what << ": " << g.body;
      ++checked;
      continue;
    }
    const int need = Rank(op.role);
    ASSERT_GE(need, 0) << what;
    const bool destructive = m != "GET";
    // Outside any namespace (approving a user, the server's audit), a caller with no role is
    // refused like the others.
    const bool in_namespace = url.rfind("/api/v1/users", 0) != 0 && url.rfind("/api/v1/audit", 0) != 0;
    for (const auto& role : kLadder) {
      const int rank = Rank(role);
      // A change is made once, by the least role allowed; reads by every role.
      if (rank > need && destructive) continue;
      Got g = op.id == "followLog" ? Got{FollowStatus(url, tokens_[role]), Json()}
                                   : Call(m, url, "{}", tokens_[role]);
      ++checked;
      const std::string msg = g.body.is_object() ? g.body.dump() : "";
      if (rank < need) {
        EXPECT_EQ(g.status, role == "none" && in_namespace ? 404 : 403)
            << what << " as " << role << ": " << msg;
        if (g.status == 403) {
          EXPECT_NE(msg.find("permission_denied"), std::string::npos)
              << what << " as " << role << ": " << msg;
        }
      } else {
        EXPECT_NE(g.status, 401) << what << " as " << role << ": " << msg;
        EXPECT_NE(g.status, 403) << what << " as " << role << ": " << msg;
        EXPECT_NE(g.status, 404) << what << " as " << role << ": " << msg;
        EXPECT_GT(g.status, 0) << what << " as " << role << ": no answer";
      }
    }
  }
  EXPECT_GE(checked, 150);
}

INSTANTIATE_TEST_SUITE_P(Backends, MatrixTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
