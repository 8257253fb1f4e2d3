// Consistent checkpoints under `tessera local` (sync, --checkpoint-steps): a pserver killed with
// SIGKILL mid-training rolls the whole job back to its newest consistent checkpoint (model and
// data position together), and the model it ends with is, bit for bit, the one a run restarted
// from the same checkpoint ends with; also with one pserver, where the trainer reads its next batch
// while each step travels.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <regex>

#include "coord/keys.h"
#include "harness/job_probe.h"
#include "job/replica_map.h"
#include "local/local_fixture.h"
#include "tessera/model_file.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

// The newest version whose data position the master saved (-1: none yet).
int64_t NewestPosition(etcd::EtcdClient* etcd, const std::string& job) {
  etcd::GetOptions o;
  o.prefix = true;
  o.keys_only = true;
  auto r = etcd->Get(keys::PositionPrefix(job), o);
  int64_t newest = -1;
  if (!r.ok()) return newest;
  for (const auto& kv : r->kvs)
    newest = std::max<int64_t>(newest, std::stoll(std::string(keys::LastElement(kv.key))));
  return newest;
}

// True once no process's command line mentions `text` (children of a killed parent take a
// moment to go).
bool NoProcessMentions(const std::string& text) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    auto cmd = ReadFile(e.path().string() + "/cmdline");
    if (cmd.ok() && cmd->find(text) != std::string::npos) return false;
  }
  return true;
}

// The versions `tessera local` said it rolled back to, in order.
std::vector<int64_t> RollbackVersions(const std::string& output) {
  std::vector<int64_t> out;
  std::regex re("rolling back to the consistent checkpoint of version (\\d+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stoll((*it)[1]));
  return out;
}

class RollbackTest : public LocalTest {
 protected:
  // Trains until a consistent checkpoint, kills everything, and resumes the same state twice: B
  // is left alone, A loses its last pserver once past a newer checkpoint. A rolls back to that
  // checkpoint and ends with B's parameters bit for bit. Sets *logs_out to A's logs.
  void RollBackAndCompare(int pservers, std::string* logs_out);
};

void RollbackTest::RollBackAndCompare(int pservers, std::string* logs_out) {
  UploadFashionMnist();
  const std::string job = "det";
  std::vector<std::string> args = {"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp"};
  args.insert(args.end(), {"--model-arg", "hidden=32", "--trainers", "1", "--passes", "3", "--job", job});
  args.insert(args.end(), {"--checkpoint-steps", "40", "--pservers", std::to_string(pservers)});
  auto resumed = args;
  resumed.push_back("--resume");

  // 1. Train until a consistent checkpoint is saved, then kill `tessera local` (and so everything).
  Subprocess& first = StartLocal(args);
  auto etcd = JobEtcd(first.pid());
  ASSERT_NE(etcd, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return NewestPosition(etcd.get(), job) >= 200; }, std::chrono::seconds(120),
                        std::chrono::milliseconds(50)))
      << first.Output() << LogsTail(20);
  first.Kill();
  ASSERT_TRUE(first.Wait(std::chrono::seconds(30)).has_value());
  etcd.reset();
  ASSERT_TRUE(WaitUntil([&] { return NoProcessMentions(run() + "/"); }, std::chrono::seconds(30)));

  // 2. The same state twice: B is resumed and left alone.
  fs::copy(run(), dir_ + "/runB", fs::copy_options::recursive);
  run_name_ = "runB";
  Subprocess& b = StartLocal(resumed);
  auto b_code = b.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(b_code.has_value()) << b.Output() << LogsTail(40);
  ASSERT_EQ(*b_code, 0) << b.Output() << LogsTail(40);
  auto b_rollbacks = RollbackVersions(b.Output());
  ASSERT_EQ(b_rollbacks.size(), 1u) << b.Output();
  const int64_t v = b_rollbacks[0];
  EXPECT_GT(v, 0) << "a checkpoint past the initial one";
  auto model_b = models::ReadModelFile(run() + "/model.tsm");
  ASSERT_TRUE(model_b.ok()) << model_b.status();

  // 3. A is resumed from the same state and loses a pserver once it is past a newer checkpoint.
  run_name_ = "run";
  Subprocess& a = StartLocal(resumed);
  etcd = JobEtcd(a.pid());
  ASSERT_NE(etcd, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return NewestPosition(etcd.get(), job) >= v + 200; }, std::chrono::seconds(120),
                        std::chrono::milliseconds(50)))
      << a.Output() << LogsTail(20);
  int64_t ps = RegisteredPid(etcd.get(), keys::PserverPrefix(job), std::to_string(pservers - 1));
  ASSERT_GT(ps, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(ps), SIGKILL), 0);
  auto a_code = a.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(a_code.has_value()) << a.Output() << LogsTail(40);
  ASSERT_EQ(*a_code, 0) << a.Output() << LogsTail(40);
  auto a_rollbacks = RollbackVersions(a.Output());
  ASSERT_EQ(a_rollbacks.size(), 2u) << a.Output();
  EXPECT_EQ(a_rollbacks[0], v);  // the resume
  EXPECT_GT(a_rollbacks[1], v) << "the pserver loss rolled back to a newer checkpoint";
  std::string logs = LogsTail(400);
  for (int i = 0; i < pservers; ++i) {
    EXPECT_NE(logs.find("pserver " + std::to_string(i) + ": loaded the checkpoint of version " +
                        std::to_string(a_rollbacks[1])),
              std::string::npos)
        << logs;
  }
  EXPECT_NE(logs.find("rolled back to the data position of version " + std::to_string(a_rollbacks[1])),
            std::string::npos)
      << logs;
  auto model_a = models::ReadModelFile(run() + "/model.tsm");
  ASSERT_TRUE(model_a.ok()) << model_a.status();

  // 4. Bit for bit the same parameters.
  ExpectSameParameters(*model_a, *model_b);
  auto r = Result();
  EXPECT_EQ(r["failed_tasks"], 0);
  EXPECT_GE(r["metrics"]["accuracy"].get<double>(), 0.75);
  *logs_out = logs;
}

TEST_F(RollbackTest, PserverKilledInSyncModeRollsBackAndEndsBitForBitLikeARestartFromTheCheckpoint) {
  std::string logs;
  RollBackAndCompare(2, &logs);
}

// One trainer and one pserver over shared memory: the trainer begins each step on values arriving
// in place, reading its next batch while the step before travels. The records so read count for
// the data position after that step, so the rollback and the restart still agree bit for bit.
TEST_F(RollbackTest, WithOnePserverTheTrainerWorkingAheadRollsBackBitForBitToo) {
  std::string logs;
  RollBackAndCompare(1, &logs);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(logs, m, std::regex(R"((\d+) steps begun on values arriving in place)")))
      << logs;
  EXPECT_GT(std::stoi(m[1]), 100) << logs;
}

// With --replicas 2 a pserver killed mid-job is replaced by its shards' backups: no rollback, no
// re-initialization from a trainer's copy, and the job ends normally.
TEST_F(LocalTest, WithReplicasAKilledPserverIsTakenOverByItsBackups) {
  UploadFashionMnist();
  const std::string job = "rep";
  Subprocess& p = StartLocal({"--dataset", "fm", "--model", "mlp", "--model-arg", "hidden=32", "--pservers",
                              "3", "--trainers", "2", "--replicas", "2", "--passes", "8", "--job", job});
  auto etcd = JobEtcd(p.pid());
  ASSERT_NE(etcd, nullptr);
  // Every shard copied, and training under way.
  ASSERT_TRUE(WaitUntil([&] { return FullyReplicated(etcd.get(), job); }, std::chrono::seconds(120),
                        std::chrono::milliseconds(20)))
      << p.Output() << LogsTail(20);
  int64_t ps = RegisteredPid(etcd.get(), keys::PserverHostPrefix(job), "1");
  ASSERT_GT(ps, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(ps), SIGKILL), 0);
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << p.Output() << LogsTail(40);
  ASSERT_EQ(*code, 0) << p.Output() << LogsTail(40);
  EXPECT_TRUE(RollbackVersions(p.Output()).empty()) << p.Output();
  std::string logs = LogsTail(2000);
  EXPECT_NE(logs.find("host 1 is gone; its shards fail over"), std::string::npos) << logs;
  EXPECT_NE(logs.find("takes over as the shard's primary"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("re-initializing"), std::string::npos) << logs;
  EXPECT_EQ(Result()["failed_tasks"], 0);
}

}  // namespace
}  // namespace tessera::testing
