// `tessera local` with elastic pservers: pservers added and removed while a sync job trains
// (`tessera local scale --pservers`) leave the parameters bit for bit those of the same job left
// on its first pservers, with nothing rolled back; scales the job cannot take are refused.
#include <gtest/gtest.h>

#include <optional>

#include "coord/keys.h"
#include "harness/job_probe.h"
#include "job/replica_map.h"
#include "local/local_fixture.h"
#include "tessera/model_file.h"

namespace tessera::testing {
namespace {

std::optional<ReplicaMap> MapOf(etcd::EtcdClient* etcd, const std::string& job) {
  auto kv = etcd->Get(keys::ReplicaMap(job));
  if (!kv.ok() || kv->kvs.empty()) return std::nullopt;
  auto m = ReplicaMap::FromJson(kv->kvs[0].value);
  if (!m.ok()) return std::nullopt;
  return *m;
}

TEST_F(LocalTest, PserversAddedAndRemovedWhileASyncJobTrainsChangeNoBit) {
  UploadFashionMnist(/*test_set=*/false);
  const std::string job = "grow";
  // One trainer: its steps, and so the parameters, do not depend on timing.
  const std::vector<std::string> args = {
      "--dataset",        "fm", "--model",    "mlp", "--model-arg", "hidden=32", "--pservers", "4",
      "--start-pservers", "2",  "--trainers", "1",   "--passes",    "20",        "--job",      job};

  // A: the job left on its first 2 pservers.
  run_name_ = "fixed";
  Subprocess& a = StartLocal(args);
  auto a_code = a.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(a_code.has_value()) << a.Output() << LogsTail(40);
  ASSERT_EQ(*a_code, 0) << a.Output() << LogsTail(40);
  EXPECT_NE(a.Output().find("elastic: 4 shards, 1..4 pservers"), std::string::npos) << a.Output();
  auto model_a = models::ReadModelFile(run() + "/model.tsm");
  ASSERT_TRUE(model_a.ok()) << model_a.status();

  // B: the same job scaled 2 -> 4 -> 3 while it trains.
  run_name_ = "run";
  Subprocess& b = StartLocal(args);
  auto etcd = JobEtcd(b.pid());
  ASSERT_NE(etcd, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return MasterStatus(etcd.get(), job).samples() > 30000; },
                        std::chrono::seconds(120), std::chrono::milliseconds(50)))
      << b.Output() << LogsTail(20);

  // More pservers than shards, and none at all, are refused.
  auto five = Tessera({"local", "scale", "--run", run(), "--pservers", "5"});
  EXPECT_NE(five.code, 0);
  EXPECT_NE(five.out.find("--pservers must be 1..4 (the job's shards), not 5"), std::string::npos)
      << five.out;
  auto none = Tessera({"local", "scale", "--run", run(), "--pservers", "0"});
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.out.find("--pservers must be 1..4"), std::string::npos) << none.out;

  auto up = Tessera({"local", "scale", "--run", run(), "--pservers", "4"});
  ASSERT_EQ(up.code, 0) << up.out;
  EXPECT_NE(up.out.find("to run 4 pservers"), std::string::npos) << up.out;
  // Every pserver the primary of one shard.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto m = MapOf(etcd.get(), job);
        if (!m) return false;
        for (int h = 0; h < 4; ++h)
          if (m->PrimarySlotsOf(h).size() != 1) return false;
        return true;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(50)))
      << b.Output() << LogsTail(20);
  // `tessera status` shows each shard's holder and state.
  auto where = nlohmann::json::parse(*ReadFile(run() + "/run.json"));
  auto status = Tessera({"status", "--etcd", where["etcd"].get<std::string>(), "--job", job});
  ASSERT_EQ(status.code, 0) << status.out;
  for (int s = 0; s < 4; ++s) {
    EXPECT_NE(status.out.find("shard " + std::to_string(s) + ": primary on host "), std::string::npos)
        << status.out;
  }
  size_t ok = 0;
  for (size_t at = status.out.find("backups on none; ok"); at != std::string::npos;
       at = status.out.find("backups on none; ok", at + 1))
    ++ok;
  EXPECT_EQ(ok, 4u) << status.out;

  auto down = Tessera({"local", "scale", "--run", run(), "--pservers", "3"});
  ASSERT_EQ(down.code, 0) << down.out;
  // pserver-3 hands its shard over and goes.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto m = MapOf(etcd.get(), job);
        return m && m->SlotsHeldBy(3).empty() &&
               RegisteredPid(etcd.get(), keys::PserverHostPrefix(job), "3") == 0;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(50)))
      << b.Output() << LogsTail(20);
  ASSERT_FALSE(MasterStatus(etcd.get(), job).finished())
      << "the job ended before the scaling was over: it proves nothing (give it more passes)";

  auto b_code = b.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(b_code.has_value()) << b.Output() << LogsTail(40);
  ASSERT_EQ(*b_code, 0) << b.Output() << LogsTail(40);
  const std::string out = b.Output();
  EXPECT_NE(out.find("scaled up: started pserver-2 (3 pservers)"), std::string::npos) << out;
  EXPECT_NE(out.find("scaled up: started pserver-3 (4 pservers)"), std::string::npos) << out;
  EXPECT_NE(out.find("scaled down: stopping pserver-3 once it has handed its shards over (3 pservers)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("rolling back"), std::string::npos) << out;
  const std::string logs = LogsTail(3000);
  EXPECT_NE(logs.find("pserver host 3 is leaving: handing 1 shards over first"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("not handed over"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("re-initializing"), std::string::npos) << logs;
  EXPECT_EQ(Result()["failed_tasks"], 0);
  auto model_b = models::ReadModelFile(run() + "/model.tsm");
  ASSERT_TRUE(model_b.ok()) << model_b.status();
  ExpectSameParameters(*model_a, *model_b);
}

TEST_F(LocalTest, PserversOfAJobThatIsNotElasticCannotBeScaled) {
  UploadFashionMnist(/*test_set=*/false);
  Subprocess& p = StartLocal({"--dataset", "fm", "--model", "mlp", "--model-arg", "hidden=16", "--pservers",
                              "2", "--trainers", "1", "--passes", "50", "--job", "fixed"});
  auto etcd = JobEtcd(p.pid());
  ASSERT_NE(etcd, nullptr);
  auto r = Tessera({"local", "scale", "--run", run(), "--pservers", "3"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(
      r.out.find("job 'fixed' is not elastic: its 2 pservers are fixed. Start it with --start-pservers N"),
      std::string::npos)
      << r.out;
  auto nothing = Tessera({"local", "scale", "--run", run()});
  EXPECT_NE(nothing.code, 0);
  EXPECT_NE(nothing.out.find("say what to scale: --trainers N and/or --pservers N"), std::string::npos)
      << nothing.out;
  EXPECT_TRUE(p.Terminate(std::chrono::seconds(60)).has_value()) << p.Output();
}

}  // namespace
}  // namespace tessera::testing
