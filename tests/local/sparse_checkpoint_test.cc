// Incremental checkpoints in a running sparse job: a pserver killed while its newest checkpoint
// is a delta comes back from the base with its deltas applied, and the job finishes well.
#include <gtest/gtest.h>
#include <signal.h>

#include "checkpoint/checkpoint_choice.h"
#include "coord/keys.h"
#include "local/local_fixture.h"

namespace tessera::testing {
namespace {

TEST_F(LocalTest, APserverKilledAfterADeltaComesBackFromTheBaseAndItsDeltas) {
  UploadCtr({"--rows", "100000", "--features", "1000000"});
  ASSERT_FALSE(HasFailure());
  Subprocess& p = StartLocal({"--dataset", "ctr", "--eval-dataset", "ctr-eval", "--model", "logreg",
                              "--passes", "8", "--optimizer", "ftrl:alpha=0.1,beta=0.01,l1=0.0003",
                              "--pservers", "2", "--checkpoint-every", "0.3", "--job", "deltas"});
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  // Freeze pserver 0 (it records nothing while stopped) and look at its newest record: a delta,
  // kill it; a whole one, let it go on and look again.
  CheckpointRecord killed_at;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const int64_t ps = RegisteredPid(etcd.get(), keys::PserverPrefix("deltas"), "0");
        if (ps <= 0 || ::kill(static_cast<pid_t>(ps), SIGSTOP) != 0) return false;
        auto rec = etcd->Get(keys::Checkpoint("deltas", 0));
        auto records = rec.ok() && !rec->kvs.empty()
                           ? DecodeCheckpointRecords(rec->kvs[0].value)
                           : StatusOr<std::vector<CheckpointRecord>>(Status::NotFound(""));
        if (records.ok() && !records->empty() && (*records)[0].delta()) {
          killed_at = (*records)[0];
          ::kill(static_cast<pid_t>(ps), SIGKILL);
          ::kill(static_cast<pid_t>(ps), SIGCONT);
          return true;
        }
        ::kill(static_cast<pid_t>(ps), SIGCONT);
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(50)))
      << p.Output() << LogsTail(40);
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << p.Output() << LogsTail(40);
  ASSERT_EQ(*code, 0) << p.Output() << LogsTail(40);
  auto log = ReadFile(run() + "/logs/pserver-0.log");
  ASSERT_TRUE(log.ok());
  const std::string rebuilt = "pserver 0: checkpoint of version " + std::to_string(killed_at.version) +
                              " rebuilt from the base of version " +
                              std::to_string(killed_at.chain[0].version) + " and " +
                              std::to_string(killed_at.chain.size()) + " delta";
  EXPECT_NE(log->find(rebuilt), std::string::npos) << rebuilt << "\n" << *log;
  EXPECT_NE(log->find("pserver 0: loaded the checkpoint of version " + std::to_string(killed_at.version)),
            std::string::npos)
      << *log;
  auto r = Result();
  EXPECT_EQ(r["failed_tasks"], 0);
  EXPECT_GE(r["metrics"]["auc"].get<double>(), 0.77);
  std::printf(
      "[ deltas ] killed at a delta of version %lld (delta %zu on the base of version %lld); AUC %.4f\n",
      static_cast<long long>(killed_at.version), killed_at.chain.size(),
      static_cast<long long>(killed_at.chain[0].version), r["metrics"]["auc"].get<double>());
}

}  // namespace
}  // namespace tessera::testing
