// The command line against a real `tessera server` on each database backend, as a user types
// it: signup and login (the token kept in the config directory, mode 0600), a data set upload
// killed halfway and resumed (the data set checks out), a directory with a PyTorch script
// submitted and run to the end on the local backend with its log followed, its logs and cost
// history read after it ended and after the server was killed and restarted; scale, stop,
// delete, Ctrl-C, and the usual mistakes answered with what went wrong.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/files.h"
#include "common/strings.h"
#include "harness/wait.h"
#include "server/cli_fixture.h"

namespace tessera::server {
namespace {

TEST_P(CliTest, ACodeDirectoryRunsToTheEndAndItsLogsAndCostOutliveTheJobAndARestart) {
  SignUpAndLogIn();
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/cfg/login.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the token is a secret";
  UploadFm();
  // A directory holding a PyTorch script (and data it must not send: over the package limit).
  WriteProject(false);
  Ran big = Cli({"submit", "--dataset", "fm", "--", "/usr/bin/python3", "train.py"});
  EXPECT_EQ(big.code, 1);
  EXPECT_TRUE(Has(big.out, "data/big.bin (6")) << big.out;
  EXPECT_TRUE(Has(big.out, ".tesseraignore")) << big.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/server/packages")) << "nothing stored";
  WriteProject(true);
  Ran sub = Cli({"submit", "--name", "torch", "--dataset", "fm", "--eval-dataset", "fm", "--passes", "1",
                 "--trainers", "2", "--", "/usr/bin/python3", "train.py", "--mlp"});
  ASSERT_EQ(sub.code, 0) << sub.out;
  const std::string id = JobId(sub.out);
  ASSERT_FALSE(id.empty()) << sub.out;
  EXPECT_TRUE(Has(sub.out, url_ + "/#/job/" + id)) << "the job's page: " << sub.out;
  EXPECT_TRUE(Has(sub.out, "packed 2 files")) << "train.py and .tesseraignore: " << sub.out;
  // Its trainer's log, followed from the start to the job's end.
  Ran follow = Cli({"logs", "-f", id, "trainer-0"}, "", 400);
  EXPECT_EQ(follow.code, 0) << follow.out;
  EXPECT_TRUE(Has(follow.out, "pass 1: accuracy")) << follow.out;
  ASSERT_TRUE(WaitJob(
      id, [](const Json& j) { return !j.value("ended_ms", Json()).is_null(); }, 120));
  Ran show = Cli({"jobs", id});
  EXPECT_TRUE(Has(show.out, "state      succeeded")) << show.out;
  EXPECT_TRUE(Has(show.out, "`/usr/bin/python3 train.py --mlp` on fm")) << show.out;
  Ran metrics = Cli({"metrics", id});
  ASSERT_EQ(metrics.code, 0) << metrics.out;
  EXPECT_TRUE(Has(metrics.out, "cost")) << metrics.out;
  EXPECT_TRUE(Has(metrics.out, "accuracy")) << metrics.out;
  Ran log = Cli({"logs", id, "trainer-0", "--tail", "0"});
  ASSERT_TRUE(Has(log.out, "pass 1: accuracy")) << log.out;

  // The server killed and started again (on a new port): all of it is still there.
  server_->Kill();
  StartServer();
  EXPECT_EQ(Cli({"metrics", id}).out, metrics.out);
  EXPECT_EQ(Cli({"logs", id, "trainer-0", "--tail", "0"}).out, log.out);
  Ran list = Cli({"jobs"});
  EXPECT_TRUE(std::regex_search(list.out, std::regex(id + " +succeeded"))) << list.out;

  // Logging out revokes the token.
  const std::string token = Token();
  Ran out = Cli({"logout"});
  EXPECT_EQ(out.code, 0) << out.out;
  EXPECT_EQ(Call("GET", "/api/v1/me", "", token).status, 401);
  Ran gone = Cli({"jobs"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_TRUE(Has(gone.out, "not logged in: run `tessera login")) << gone.out;
}

TEST_P(CliTest, AnUploadKilledHalfwayResumesAndTheDataSetChecksOut) {
  SignUpAndLogIn();
  // Slowed down, so that it is surely cut in the middle.
  auto slow = Start({"datasets", "upload", "fm", "--format", "idx", "--images", kImages, "--labels", kLabels,
                     "--chunk-mb", "0.0625", "--limit-rate", "0.5"});
  ASSERT_TRUE(slow);
  ASSERT_TRUE(testing::WaitUntil([&] { return Received("fm") >= (256 << 10); }, std::chrono::seconds(60)))
      << slow->Output();
  slow->Kill();
  const int64_t had = Received("fm");
  ASSERT_LT(had, 4 << 20) << "the upload was to be cut halfway";
  Ran again = Cli({"datasets", "upload", "fm", "--format", "idx", "--images", kImages, "--labels", kLabels});
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(Has(again.out, "resuming upload")) << again.out;
  EXPECT_TRUE(Has(again.out, "data set fm: 10000 records")) << again.out;
  Ran show = Cli({"datasets", "show", "fm", "--records", "2", "--json"});
  ASSERT_EQ(show.code, 0) << show.out;
  Json d = Json::parse(show.out.substr(show.out.find('{')));
  EXPECT_EQ(d["records"], 10000);
  ASSERT_EQ(d["preview"].size(), 2u) << d;
  EXPECT_EQ(d["preview"][0]["label_id"], 9) << "the first label of the t10k set";
  EXPECT_EQ(d["preview"][1]["label_id"], 2);

  // Ctrl-C: stops at once, says how to go on; an unfinished upload is removed with rm.
  auto interrupted = Start({"datasets", "upload", "fm2", "--format", "idx", "--images", kImages, "--labels",
                            kLabels, "--chunk-mb", "0.0625", "--limit-rate", "0.5"});
  ASSERT_TRUE(testing::WaitUntil([&] { return Received("fm2") > 0; }, std::chrono::seconds(60)));
  ASSERT_TRUE(interrupted->Signal(SIGINT).ok());
  auto code = interrupted->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value()) << "Ctrl-C did not stop the upload: " << interrupted->Output();
  EXPECT_EQ(*code, 1);
  EXPECT_TRUE(Has(interrupted->Output(), "run the same command again to resume")) << interrupted->Output();
  // The same name with other files is refused, saying what to do.
  Ran other = Cli({"datasets", "upload", "fm2", "--format", "idx", "--images", kLabels, "--labels", kImages});
  EXPECT_EQ(other.code, 1);
  EXPECT_TRUE(Has(other.out, "other files")) << other.out;
  EXPECT_TRUE(Has(other.out, "tessera datasets rm fm2")) << other.out;
  Ran rm = Cli({"datasets", "rm", "fm2"});
  EXPECT_EQ(rm.code, 0) << rm.out;
  EXPECT_TRUE(Has(rm.out, "unfinished upload of fm2 removed")) << rm.out;
  Ran ls = Cli({"datasets", "ls"});
  EXPECT_TRUE(std::regex_search(ls.out, std::regex("fm +idx +10000"))) << ls.out;
  EXPECT_FALSE(Has(ls.out, "fm2")) << ls.out;
}

TEST_P(CliTest, ScaleStopDeleteCtrlCAndMistakes) {
  SignUpAndLogIn();
  UploadFm();
  Ran sub = Cli({"submit", "--dataset", "fm", "--model", "mlp", "--passes", "1000", "--trainers", "2",
                 "--trainers-min", "1"});
  ASSERT_EQ(sub.code, 0) << sub.out;
  const std::string id = JobId(sub.out);
  ASSERT_TRUE(WaitJob(
      id, [](const Json& j) { return j.value("state", "") == "running"; }, 120));
  // A followed log stops at Ctrl-C; the job goes on.
  auto follow = Start({"logs", "-f", id});
  ASSERT_TRUE(follow->WaitForOutput("web console", std::chrono::seconds(30))) << follow->Output();
  ASSERT_TRUE(follow->Signal(SIGINT).ok());
  auto code = follow->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value()) << follow->Output();
  EXPECT_EQ(*code, 0);
  Ran scale = Cli({"scale", id, "1"});
  EXPECT_EQ(scale.code, 0) << scale.out;
  EXPECT_TRUE(WaitJob(
      id, [](const Json& j) { return j.value("trainers", 0) == 1; }, 60));
  Ran early = Cli({"delete", id});
  EXPECT_EQ(early.code, 1) << "a running job is not deleted";
  Ran stop = Cli({"stop", id});
  EXPECT_EQ(stop.code, 0) << stop.out;
  EXPECT_TRUE(WaitJob(
      id, [](const Json& j) { return j.value("state", "") == "stopped"; }, 90));
  Ran del = Cli({"delete", id});
  EXPECT_EQ(del.code, 0) << del.out;
  Ran none = Cli({"jobs", id});
  EXPECT_EQ(none.code, 1);
  EXPECT_TRUE(Has(none.out, "no job '" + id + "'")) << none.out;

  // Mistakes, each answered with what is wrong.
  const std::vector<std::pair<std::vector<std::string>, std::string>> mistakes = {
      {{"submit", "--model", "mlp"}, "give --dataset NAME"},
      {{"submit", "--dataset", "fm", "--model", "mlp", "--", "python3", "x.py"}, "give either --model"},
      {{"submit", "--dataset", "fm", "--model", "mlpp"}, "did you mean 'mlp'"},
      {{"submit", "--dataset", "nope", "--model", "mlp"}, "no data set 'nope'"},
      {{"jobs", "--stat", "running"}, "did you mean '--state'"},
      {{"logs", "nope-12345678"}, "no job 'nope-12345678'"},
      {{"jobs", "--server", "http://127.0.0.1:1"}, "cannot reach the tessera server at http://127.0.0.1:1"},
      {{"jobs", "--server", "http://127.0.0.1:1/x"}, "is not of the form http://HOST:PORT"},
      {{"jobs", "--token", "forged"}, "run `tessera login` again"},
      {{"datasets", "upload", "x", "--format", "idx", "--images", kImages}, "--labels FILE"},
  };
  for (const auto& [args, words] : mistakes) {
    Ran r = Cli(args);
    EXPECT_NE(r.code, 0) << Join(args, " ");
    EXPECT_TRUE(Has(r.out, words)) << Join(args, " ") << ": " << r.out;
  }
  Ran wrong = Cli({"login", "--password-stdin", "ada"}, "wrong password");
  EXPECT_EQ(wrong.code, 1);
  EXPECT_TRUE(Has(wrong.out, "wrong user name or password")) << wrong.out;
}

// Administration from the command line: approving accounts, namespace members and their roles,
// quotas changed limit by limit (the others kept), the audit log; and what a non-admin is told.
TEST_P(CliTest, UsersMembersQuotasAndTheAuditFromTheCommandLine) {
  server_->Terminate(std::chrono::seconds(10));
  StartServer({"--require-approval"});
  SignUpAndLogIn();  // the first account administers the server and is approved
  Got grace =
      Call("POST", "/api/v1/signup", Json{{"name", "grace"}, {"password", "grace's password"}}.dump());
  ASSERT_EQ(grace.status, 201) << grace.body;
  EXPECT_EQ(
      Call("POST", "/api/v1/login", Json{{"name", "grace"}, {"password", "grace's password"}}.dump()).status,
      403);

  Ran pending = Cli({"users", "--pending"});
  ASSERT_EQ(pending.code, 0) << pending.out;
  EXPECT_TRUE(Has(pending.out, "grace")) << pending.out;
  EXPECT_FALSE(Has(pending.out, "ada ")) << "ada is approved: " << pending.out;
  Ran approve = Cli({"users", "approve", "grace"});
  ASSERT_EQ(approve.code, 0) << approve.out;
  EXPECT_TRUE(Has(approve.out, "user grace approved")) << approve.out;
  const std::string grace_token = Login("grace", "grace's password");
  ASSERT_FALSE(grace_token.empty());

  Ran add = Cli({"members", "set", "grace", "member", "-n", "ada"});
  ASSERT_EQ(add.code, 0) << add.out;
  Ran members = Cli({"members", "-n", "ada"});
  ASSERT_EQ(members.code, 0) << members.out;
  EXPECT_TRUE(std::regex_search(members.out, std::regex("grace +member"))) << members.out;
  EXPECT_TRUE(std::regex_search(members.out, std::regex("ada +admin"))) << members.out;
  Ran remove = Cli({"members", "remove", "grace", "-n", "ada"});
  ASSERT_EQ(remove.code, 0) << remove.out;
  EXPECT_FALSE(Has(Cli({"members"}).out, "grace"));

  // Limits set one by one: each command keeps the others; --clear removes one.
  ASSERT_EQ(Cli({"quota", "set", "--cpu", "2.5", "--trainers", "4"}).code, 0);
  Ran more = Cli({"quota", "set", "--jobs", "3"});
  ASSERT_EQ(more.code, 0) << more.out;
  Ran q = Cli({"quota", "--json"});
  ASSERT_EQ(q.code, 0) << q.out;
  Json limits = Json::parse(q.out.substr(q.out.find('{')))["limits"];
  EXPECT_EQ(limits.value("cpu", 0.0), 2.5) << limits;
  EXPECT_EQ(limits.value("trainers", 0), 4) << limits;
  EXPECT_EQ(limits.value("jobs", 0), 3) << limits;
  ASSERT_EQ(Cli({"quota", "set", "--clear", "cpu"}).code, 0);
  Ran table = Cli({"quota"});
  EXPECT_TRUE(std::regex_search(table.out, std::regex("cpu +[0-9.]+ +none"))) << table.out;
  EXPECT_TRUE(std::regex_search(table.out, std::regex("trainers +[0-9]+ +4"))) << table.out;

  Ran audit = Cli({"audit"});
  ASSERT_EQ(audit.code, 0) << audit.out;
  EXPECT_TRUE(Has(audit.out, "set quota")) << audit.out;
  EXPECT_TRUE(Has(audit.out, "set member")) << audit.out;
  Ran logins = Cli({"audit", "--server-wide", "--action", "login"});
  ASSERT_EQ(logins.code, 0) << logins.out;
  EXPECT_TRUE(Has(logins.out, "grace")) << logins.out;
  EXPECT_FALSE(Has(logins.out, "set quota")) << logins.out;

  // Mistakes, and a user who is not an administrator.
  Ran nothing = Cli({"quota", "set"});
  EXPECT_EQ(nothing.code, 1);
  EXPECT_TRUE(Has(nothing.out, "nothing to set")) << nothing.out;
  Ran role = Cli({"members", "set", "grace", "boss"});
  EXPECT_EQ(role.code, 2) << role.out;
  Ran negative = Cli({"quota", "set", "--cpu", "-1"});
  EXPECT_EQ(negative.code, 2) << negative.out;
  Ran not_admin = Cli({"users", "--token", grace_token});
  EXPECT_EQ(not_admin.code, 1);
  EXPECT_TRUE(Has(not_admin.out, "only a server administrator")) << not_admin.out;
  Ran not_theirs = Cli({"quota", "set", "-n", "grace", "--cpu", "8", "--token", grace_token});
  EXPECT_EQ(not_theirs.code, 1) << not_theirs.out;
}

// HTTPS: a server with a certificate from the test's own CA; the client trusts it with
// --ca-cert and refuses it without; a certificate that cannot be read stops the server at once.
TEST_P(CliTest, HttpsWithTheServersCaAndRefusedWithout) {
  const std::string tls = dir_ + "/tls";
  std::filesystem::create_directories(tls);
  const std::string script =
      "set -e; cd " + tls +
      "; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out "
      "ca.pem "
      "-days 2 -subj /CN=tessera-test-ca"
      "; openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out "
      "server.csr "
      "-subj /CN=127.0.0.1"
      "; printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext"
      "; openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
      "-extfile san.ext";
  testing::SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.log_path = tls + "/openssl.log";
  auto gen = testing::Subprocess::Spawn(o);
  ASSERT_TRUE(gen.ok());
  ASSERT_EQ((*gen)->Wait(std::chrono::seconds(60)), 0) << (*gen)->Output();

  server_->Terminate(std::chrono::seconds(10));
  StartServer({"--cert", tls + "/server.pem", "--key", tls + "/server.key"});
  ASSERT_EQ(url_.rfind("https://", 0), 0u) << url_;
  Ran up = Cli({"signup", "--password-stdin", "--ca-cert", tls + "/ca.pem", "ada"}, "correct horse");
  ASSERT_EQ(up.code, 0) << up.out;
  Ran in = Cli({"login", "--password-stdin", "--ca-cert", tls + "/ca.pem", "ada"}, "correct horse");
  ASSERT_EQ(in.code, 0) << in.out;
  Ran ls = Cli({"datasets", "ls", "--ca-cert", tls + "/ca.pem"});
  EXPECT_EQ(ls.code, 0) << ls.out;
  Ran untrusted = Cli({"jobs"});
  EXPECT_EQ(untrusted.code, 1);
  EXPECT_TRUE(Has(untrusted.out, "certificate is not trusted")) << untrusted.out;
  std::string plain = url_;
  plain.replace(0, 5, "http");
  Ran http = Cli({"jobs", "--server", plain});
  EXPECT_EQ(http.code, 1) << "plain HTTP to the HTTPS port: " << http.out;

  // A key that is not one: the server says so and exits.
  testing::SpawnOptions bad;
  bad.argv = {testing::BuildPath("src/tessera"),
              "server",
              "--port",
              "0",
              "--data-dir",
              dir_ + "/other",
              "--cert",
              tls + "/server.pem",
              "--key",
              tls + "/san.ext"};
  bad.log_path = dir_ + "/bad-server.log";
  auto b = testing::Subprocess::Spawn(bad);
  ASSERT_TRUE(b.ok());
  auto code = (*b)->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value()) << (*b)->Output();
  EXPECT_EQ(*code, 1);
  EXPECT_TRUE(Has((*b)->Output(), "not a readable PEM certificate and its private key")) << (*b)->Output();
}

INSTANTIATE_TEST_SUITE_P(Backends, CliTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
