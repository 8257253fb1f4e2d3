// `tessera launch --mpi`: a whole job started with one real mpirun (Open MPI) on this machine,
// a block of ranks per role, each rank's `tessera node` taking its role's index from its rank.
// It must train to completion, export the model, map ranks to roles and ids as documented, and
// leave no process behind, also when stopped with Ctrl-C. Skipped with a message where mpirun is
// not installed (install-deps installs openmpi-bin).
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "data/data_fixture.h"
#include "harness/job_probe.h"
#include "harness/processes.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

class MpiLaunchTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    if (!FindProgram("mpirun").ok()) GTEST_SKIP() << "mpirun is not installed (apt-get install openmpi-bin)";
    job_ = "mpi" + std::to_string(::getpid());
  }

  std::string WriteSpec(int passes, const std::string& extra = "", int lease_ttl = 3) {
    const std::string path = dir_ + "/job.yaml";
    std::ofstream(path) << "name: " << job_ << "\n"
                        << "masters: 2\npservers: 2\ntrainers: 2\n"
                        << "train: {mode: sync, optimizer: 'adam:lr=0.001', passes: " << passes
                        << ", dataset: fm, eval_dataset: fm-test, model: mlp, model_args: [hidden=64],"
                        << " lease_ttl: " << lease_ttl << ", checkpoint_every: 2}\n"
                        << "store: {path: " << dir_ << "/store}\n"
                        << "checkpoints: {path: " << dir_ << "/ckpt}\n"
                        << extra;
    return path;
  }

  // `tessera launch --mpi` of a long job (200 passes) into `run`, once both trainers joined
  // (the pservers hold parameters); null, with the test failed, if they did not within 2 min.
  std::unique_ptr<Subprocess> LaunchUntilTraining(const std::string& run, int lease_ttl = 3) {
    if (auto up = UploadFashionMnist(dir_ + "/store"); !up) {
      ADD_FAILURE() << up.message();
      return nullptr;
    }
    SpawnOptions o;
    o.argv = {
        BuildPath("src/tessera"), "launch", "--spec", WriteSpec(200, "", lease_ttl), "--mpi", "--run", run};
    o.log_path = dir_ + "/launch.log";
    auto p = Subprocess::Spawn(o);
    if (!p.ok()) {
      ADD_FAILURE() << p.status();
      return nullptr;
    }
    const bool training = WaitUntil(
        [&] {
          auto log = ReadFile(run + "/logs/mpirun.log");
          return log.ok() && log->find("trainer 1 joined") != std::string::npos;
        },
        std::chrono::seconds(120));
    if (!training) {
      ADD_FAILURE() << "the trainers did not join:\n" << (*p)->Output();
      return nullptr;
    }
    return std::move(*p);
  }

  std::string job_;
};

// A job with mutual TLS (tls.path: the certificates `tessera certs` made, on every host).
TEST_F(MpiLaunchTest, OneMpirunTrainsTheJobToCompletion) {
  ASSERT_TRUE(UploadFashionMnist(dir_ + "/store"));
  auto certs = Tessera({"certs", "--job", job_, "--out", dir_ + "/tls", "--node", "node"});
  ASSERT_EQ(certs.code, 0) << certs.out;
  const std::string spec = WriteSpec(2, "tls: {path: " + dir_ + "/tls}\n"), run = dir_ + "/run";
  auto r = Tessera({"launch", "--spec", spec, "--mpi", "--run", run}, std::chrono::seconds(240));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("job finished: accuracy"), std::string::npos) << r.out;

  auto result = ReadFile(run + "/result.json");
  ASSERT_TRUE(result.ok()) << r.out;
  auto j = nlohmann::json::parse(*result);
  EXPECT_EQ(j["passes"], 2);
  EXPECT_GT(j["metrics"]["accuracy"].get<double>(), 0.80) << *result;
  EXPECT_GT(fs::file_size(run + "/model.tsm"), 100000u);

  // Ranks 0-1 masters, 2-3 pservers 0 and 1, 4-5 trainers 0 and 1: each node's role and index
  // from OMPI_COMM_WORLD_RANK and its block's first rank.
  auto log = ReadFile(run + "/logs/mpirun.log");
  ASSERT_TRUE(log.ok());
  for (auto [rank, name] :
       {std::pair{0, "master-0"}, std::pair{1, "master-1"}, std::pair{2, "pserver-0"},
        std::pair{3, "pserver-1"}, std::pair{4, "trainer-0"}, std::pair{5, "trainer-1"}}) {
    const std::string line =
        "[1," + std::to_string(rank) + "]<stderr>:tessera node: " + name + " on this host: starting";
    EXPECT_NE(log->find(line), std::string::npos) << line << "\n" << *log;
  }
  EXPECT_NE(log->find("pserver 1 serving"), std::string::npos);
  EXPECT_NE(log->find("pserver-1: stopping, as asked by the launcher (finished)"), std::string::npos) << *log;
  EXPECT_TRUE(ProcessesWith("--job " + job_).empty());

  // A second launch into the same run directory, or over the same model, is refused.
  auto again = Tessera({"launch", "--spec", spec, "--mpi", "--run", run});
  EXPECT_NE(again.code, 0);
  EXPECT_NE(again.out.find(run), std::string::npos) << again.out;
}

TEST_F(MpiLaunchTest, CtrlCStopsEveryRankAndEtcd) {
  const std::string run = dir_ + "/run";
  auto p = LaunchUntilTraining(run);
  ASSERT_NE(p, nullptr);
  // Training has begun; then Ctrl-C.
  const auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(p->Signal(SIGINT).ok());
  auto code = p->Wait(std::chrono::seconds(120));
  ASSERT_TRUE(code.has_value()) << p->Output();
  EXPECT_EQ(*code, 128 + SIGINT) << p->Output();
  EXPECT_NE(p->Output().find("stopped before the job finished"), std::string::npos) << p->Output();
  std::printf("stopped in %.1f s\n", SecondsSince(stopped_at));
  EXPECT_TRUE(ProcessesWith("--job " + job_).empty());
  EXPECT_FALSE(fs::exists(run + "/model.tsm"));
  auto log = ReadFile(run + "/logs/mpirun.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("trainer-0: stopping, as asked by the launcher (stopped)"), std::string::npos) << *log;
}

// The launcher killed outright (it cannot clean up): mpirun dies with it (its parent-death
// signal), and every rank, seeing its parent gone, stops its role's process as on SIGTERM; nothing
// of the job is left running.
TEST_F(MpiLaunchTest, ALauncherKilledOutrightLeavesNoRankRunning) {
  const std::string run = dir_ + "/run";
  auto p = LaunchUntilTraining(run);
  ASSERT_NE(p, nullptr);
  // The ranks name the job; the master, the pservers and etcd name this test's directory.
  auto left = [&] {
    auto a = ProcessesWith("--job " + job_), b = ProcessesWith(dir_);
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  ASSERT_GE(left().size(), 7u) << "6 ranks, their processes and etcd";
  ASSERT_TRUE(p->Signal(SIGKILL).ok());
  (void)p->Wait(std::chrono::seconds(10));
  EXPECT_TRUE(WaitUntil([&] { return left().empty(); }, std::chrono::seconds(60)))
      << "still running after the launcher was killed:\n"
      << ProcessesText("--job " + job_) << ProcessesText(dir_);
  for (const auto& x : left()) ::kill(std::stoi(x), SIGKILL);  // on failure: leave nothing behind
}

// A pserver killed with SIGKILL under its rank: the rank releases its registration at once (the
// lease is 30 s here) and starts it again.
TEST_F(MpiLaunchTest, ARankReleasesItsDeadProcesssRegistrationAtOnce) {
  const std::string run = dir_ + "/run";
  auto p = LaunchUntilTraining(run, /*lease_ttl=*/30);
  ASSERT_NE(p, nullptr);
  auto info = ReadFile(run + "/run.json");
  ASSERT_TRUE(info.ok());
  etcd::EtcdOptions eo;
  eo.endpoints = {nlohmann::json::parse(*info)["etcd"].get<std::string>()};
  auto etcd = etcd::EtcdClient::Create(eo);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const auto prefix = keys::PserverPrefix(job_);
  const pid_t first = static_cast<pid_t>(RegisteredPid(etcd->get(), prefix, "1"));
  ASSERT_NE(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  EXPECT_TRUE(
      WaitUntil([&] { return RegisteredPid(etcd->get(), prefix, "1") != first; }, std::chrono::seconds(20)))
      << "pserver 1's registration waited for its 30 s lease";
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto log = ReadFile(run + "/logs/mpirun.log");
        return log.ok() && log->find("pserver-1: its registration released at once") != std::string::npos;
      },
      std::chrono::seconds(10)));
  ASSERT_TRUE(p->Signal(SIGINT).ok());
  ASSERT_TRUE(p->Wait(std::chrono::seconds(120)).has_value());
}

TEST_F(MpiLaunchTest, MistakesAreRefusedWithAClearMessage) {
  const std::string spec = WriteSpec(1);
  auto no_engine = Tessera({"launch", "--spec", spec});
  EXPECT_NE(no_engine.code, 0);
  EXPECT_NE(no_engine.out.find("--mpi (one mpirun) or --hosts FILE (ssh)"), std::string::npos)
      << no_engine.out;
  auto no_mpirun =
      Tessera({"launch", "--spec", spec, "--mpi", "--mpirun", "/nonexistent/mpirun", "--run", dir_ + "/r1"});
  EXPECT_NE(no_mpirun.code, 0);
  EXPECT_NE(no_mpirun.out.find("apt-get install openmpi-bin"), std::string::npos) << no_mpirun.out;
  auto no_rank =
      Tessera({"node", "--role", "trainer", "--etcd", "127.0.0.1:1", "--job", "j", "--first-rank", "0"});
  EXPECT_NE(no_rank.code, 0);
  EXPECT_NE(no_rank.out.find("no MPI rank in the environment"), std::string::npos) << no_rank.out;
  auto bad_role = Tessera({"node", "--role", "trainr", "--etcd", "127.0.0.1:1", "--job", "j"});
  EXPECT_NE(bad_role.out.find("unknown role 'trainr'"), std::string::npos) << bad_role.out;
  // A data set that is not in the store: the masters give up, and the launcher shows why, from
  // the rank that failed first, not the other ranks' stopping.
  auto no_data =
      Tessera({"launch", "--spec", spec, "--mpi", "--run", dir_ + "/r2"}, std::chrono::seconds(120));
  EXPECT_NE(no_data.code, 0);
  EXPECT_NE(no_data.out.find("failed first"), std::string::npos) << no_data.out;
  EXPECT_NE(no_data.out.find("no data set at '" + dir_ + "/store/fm'"), std::string::npos) << no_data.out;
  EXPECT_NE(no_data.out.find("giving up"), std::string::npos) << no_data.out;
  // --dry-run prints the one mpirun command line and starts nothing.
  auto dry = Tessera({"launch", "--spec", spec, "--mpi", "--dry-run"});
  EXPECT_EQ(dry.code, 0) << dry.out;
  EXPECT_NE(dry.out.find("--oversubscribe"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("node --role trainer"), std::string::npos) << dry.out;
  EXPECT_TRUE(ProcessesWith("--job " + job_).empty());
}

}  // namespace
}  // namespace tessera::testing
