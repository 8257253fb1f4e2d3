// `tessera local` as a cluster: trainers added and removed while a sync job runs (it finishes
// with the expected result and no task lost); a pserver and a trainer killed with SIGKILL are
// restarted and the job finishes; Ctrl-C stops everything and leaves no process behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "checkpoint/checkpoint_choice.h"
#include "checkpoint/checkpoint_file.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "harness/job_probe.h"
#include "local/local_fixture.h"

namespace tessera::testing {
namespace {

TEST_F(LocalTest, TrainersAddedAndRemovedWhileASyncJobRuns) {
  UploadFashionMnist();
  Subprocess& p =
      StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--pservers", "2",
                  "--trainers", "3", "--passes", "10", "--model-arg", "hidden=64", "--job", "elastic"});
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  // Wait for training to be under way, then add a fourth trainer.
  ASSERT_TRUE(WaitUntil([&] { return MasterStatus(etcd.get(), "elastic").samples() > 5000; },
                        std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << p.Output();
  auto up = Tessera({"local", "scale", "--run", run(), "--trainers", "4"});
  ASSERT_EQ(up.code, 0) << up.out;
  ASSERT_TRUE(WaitUntil([&] { return RegisteredPid(etcd.get(), keys::TrainerPrefix("elastic"), "3") != 0; },
                        std::chrono::seconds(60)))
      << p.Output();
  // Let the newcomer take part for a while (the steps go on with it in the barrier), then go
  // down to two: trainers 3 and 2 are stopped. (10 passes: with 4, on a fast run, trainer 3 had
  // finished its last task before the scale-down, and there was nothing of it to stop.)
  int64_t step = MasterStatus(etcd.get(), "elastic").step();
  ASSERT_TRUE(WaitUntil([&] { return MasterStatus(etcd.get(), "elastic").step() > step + 30; },
                        std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << p.Output();
  auto down = Tessera({"local", "scale", "--run", run(), "--trainers", "2"});
  ASSERT_EQ(down.code, 0) << down.out;
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << p.Output() << LogsTail(40);
  ASSERT_EQ(*code, 0) << p.Output() << LogsTail();
  EXPECT_NE(p.Output().find("scaled up: started trainer-3"), std::string::npos) << p.Output();
  EXPECT_NE(p.Output().find("scaled down: stopping trainer-3"), std::string::npos) << p.Output();
  EXPECT_NE(p.Output().find("scaled down: stopping trainer-2"), std::string::npos) << p.Output();
  auto r = Result();
  EXPECT_EQ(r["failed_tasks"], 0) << "no task lost";
  EXPECT_GE(r["samples"].get<int64_t>(), 9 * 60000) << "every record of every pass was trained (some twice)";
  EXPECT_GE(r["metrics"]["accuracy"].get<double>(), 0.80);
}

TEST_F(LocalTest, KilledPserverAndTrainerAreRestartedAndTheJobFinishes) {
  UploadFashionMnist();
  Subprocess& p =
      StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--pservers", "2",
                  "--trainers", "2", "--passes", "12", "--model-arg", "hidden=64", "--job", "chaos"});
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  // Kill once the second pass is well under way. A pass takes well under a second here, so the
  // job has passes to spare: a loaded machine that sees this late still kills mid-job (with 4
  // passes the trainers had sometimes finished and left before the kill).
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto s = MasterStatus(etcd.get(), "chaos");
        return s.pass() >= 1 && s.done() > 10;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << p.Output();
  int64_t ps = RegisteredPid(etcd.get(), keys::PserverPrefix("chaos"), "1");
  int64_t tr = RegisteredPid(etcd.get(), keys::TrainerPrefix("chaos"), "0");
  ASSERT_GT(ps, 0);
  ASSERT_GT(tr, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(ps), SIGKILL), 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(tr), SIGKILL), 0);
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << p.Output() << LogsTail(40);
  ASSERT_EQ(*code, 0) << p.Output() << LogsTail();
  // The supervisor's process names need not match the index a pserver claimed.
  EXPECT_TRUE(std::regex_search(p.Output(), std::regex("pserver-[0-9] killed by signal 9; restarting it")))
      << p.Output();
  EXPECT_NE(p.Output().find("trainer-0 killed by signal 9; restarting it"), std::string::npos) << p.Output();
  auto r = Result();
  EXPECT_EQ(r["failed_tasks"], 0);
  EXPECT_GE(r["metrics"]["accuracy"].get<double>(), 0.75);
}

TEST_F(LocalTest, CtrlCStopsEverythingAndLeavesNoProcessBehind) {
  UploadFashionMnist(false);
  Subprocess& p = StartLocal({"--dataset", "fm", "--model", "mlp", "--pservers", "2", "--trainers", "2",
                              "--passes", "50", "--job", "stopme"});
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  std::vector<int64_t> pids;
  ASSERT_TRUE(WaitUntil(
      [&] {
        pids = {RegisteredPid(etcd.get(), keys::PserverPrefix("stopme"), "0"),
                RegisteredPid(etcd.get(), keys::PserverPrefix("stopme"), "1"),
                RegisteredPid(etcd.get(), keys::TrainerPrefix("stopme"), "0"),
                RegisteredPid(etcd.get(), keys::TrainerPrefix("stopme"), "1")};
        return std::all_of(pids.begin(), pids.end(), [](int64_t x) { return x > 0; });
      },
      std::chrono::seconds(60)));
  ASSERT_TRUE(p.Signal(SIGINT).ok());
  auto code = p.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(p.Output().find("stopped before the job finished"), std::string::npos) << p.Output();
  for (int64_t pid : pids) EXPECT_NE(::kill(static_cast<pid_t>(pid), 0), 0) << "pid " << pid << " still runs";
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// With checkpoints, a pserver killed mid-training comes back with its shard from the newest good
// checkpoint (optimizer state and sparse rows included; here the newest is corrupted first, so
// the one before it), a live trainer refills its dense values, and the job finishes.
TEST_F(LocalTest, KilledPserverComesBackFromItsCheckpoint) {
  UploadFashionMnist();
  Subprocess& p = StartLocal({"--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp", "--pservers",
                              "2", "--trainers", "2", "--passes", "6", "--model-arg", "hidden=64", "--job",
                              "ckpt", "--checkpoint-every", "0.5"});
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  ASSERT_TRUE(WaitUntil(
      [&] {
        // Pass 1 reached and two checkpoints kept (the newest is damaged below).
        auto s = MasterStatus(etcd.get(), "ckpt");
        auto rec = etcd->Get(keys::Checkpoint("ckpt", 1));
        if (s.pass() < 1 || !rec.ok() || rec->kvs.empty()) return false;
        auto kept = DecodeCheckpointRecords(rec->kvs[0].value);
        return kept.ok() && kept->size() == 2;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << p.Output();
  int64_t ps = RegisteredPid(etcd.get(), keys::PserverPrefix("ckpt"), "1");
  ASSERT_GT(ps, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(ps), SIGKILL), 0);
  // Damage the newest checkpoint before the replacement starts (it waits for the dead one's
  // lease): it must be refused by name and the one before it loaded.
  auto rec = etcd->Get(keys::Checkpoint("ckpt", 1));
  ASSERT_TRUE(rec.ok() && !rec->kvs.empty());
  auto records = DecodeCheckpointRecords(rec->kvs[0].value);
  ASSERT_TRUE(records.ok() && records->size() == 2) << rec->kvs[0].value;
  const std::string newest = CheckpointPath(run() + "/checkpoints", "ckpt", 1, (*records)[0].uuid);
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << newest;
    f.seekp(100);
    f.put('\x7f');
  }
  auto code = p.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << p.Output() << LogsTail(40);
  ASSERT_EQ(*code, 0) << p.Output() << LogsTail(40);
  std::string logs = LogsTail(200);
  EXPECT_NE(
      logs.find("not loading checkpoint " + (*records)[0].uuid + " (version " +
                std::to_string((*records)[0].version) + "): its file does not match its recorded digest"),
      std::string::npos)
      << logs;
  EXPECT_NE(logs.find("pserver 1: loaded the checkpoint of version " + std::to_string((*records)[1].version)),
            std::string::npos)
      << logs;
  EXPECT_NE(logs.find("pserver 1: dense values refilled by trainer"), std::string::npos) << logs;
  auto r = Result();
  EXPECT_EQ(r["failed_tasks"], 0);
  EXPECT_GE(r["metrics"]["accuracy"].get<double>(), 0.80);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// `tessera local` itself killed mid-job (its children go with it), then `--resume`: the master
// continues from its saved task position, the pservers from their checkpoints, and the job
// finishes with the expected accuracy. Pserver 1 is made to resume from a checkpoint of version 0,
// as when the run is killed before it writes one past its initial values (its record rewritten
// after the kill), while pserver 0 resumes from a later one: the trainers agree on pserver 0's step, and
// pserver 1 closes the steps between with nothing to apply. Before, a pserver restored at version 0 waited
// for its group to form, as a new job's does, and the resumed trainers could not pull from it ("pull for
// version 85 is more than one step ahead of the pserver (at version 0)"): the run gave up.
TEST_F(LocalTest, KilledLocalRunIsResumedFromItsSavedStateAndUnevenCheckpoints) {
  UploadFashionMnist();
  const std::vector<std::string> args = {"--dataset",
                                         "fm",
                                         "--eval-dataset",
                                         "fm-test",
                                         "--model",
                                         "mlp",
                                         "--pservers",
                                         "2",
                                         "--trainers",
                                         "2",
                                         "--passes",
                                         "4",
                                         "--model-arg",
                                         "hidden=64",
                                         "--job",
                                         "resume",
                                         "--checkpoint-every",
                                         "0.5"};
  Subprocess& first = StartLocal(args);
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  auto newest = [&](int p) -> std::optional<std::pair<std::string, CheckpointRecord>> {
    auto rec = etcd->Get(keys::Checkpoint("resume", p));
    if (!rec.ok() || rec->kvs.empty()) return std::nullopt;
    auto records = DecodeCheckpointRecords(rec->kvs[0].value);
    if (!records.ok() || records->empty()) return std::nullopt;
    return std::make_pair(rec->kvs[0].value, records->front());
  };
  // Killed once both pservers have a checkpoint past the initial values and the master has moved
  // on.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto a = newest(0), b = newest(1);
        return a && b && a->second.version >= 1 && b->second.version >= 1 &&
               MasterStatus(etcd.get(), "resume").pass() >= 1;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << first.Output();
  // As if the run died before pserver 1 wrote a checkpoint past its initial values: its only
  // record is one of version 0 (its newest shard, relabelled, in a file of its own), written while
  // it is stopped (so it writes no newer one), then the run killed.
  const int64_t ps1 = RegisteredPid(etcd.get(), keys::PserverPrefix("resume"), "1");
  ASSERT_GT(ps1, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(ps1), SIGSTOP), 0);
  auto b = newest(1);
  ASSERT_TRUE(b.has_value());
  ASSERT_FALSE(b->second.delta()) << b->first;
  const std::string dir = run() + "/checkpoints";
  auto c = ReadCheckpoint(CheckpointPath(dir, "resume", 1, b->second.uuid), b->second.digest);
  ASSERT_TRUE(c.ok()) << c.status();
  c->version = 0;
  auto written = WriteCheckpoint(dir, *c);
  ASSERT_TRUE(written.ok()) << written.status();
  CheckpointRecord zero;
  zero.uuid = written->uuid;
  zero.digest = written->digest;
  zero.bytes = written->bytes;
  zero.version = 0;
  zero.time_ms = b->second.time_ms;
  ASSERT_TRUE(etcd->Put(keys::Checkpoint("resume", 1), EncodeCheckpointRecords({zero})).ok());
  first.Kill();
  ASSERT_TRUE(first.Wait(std::chrono::seconds(30)).has_value());
  etcd.reset();
  // Every child went with it (they die with their parent); the run directory stays.
  auto resumed_args = args;
  resumed_args.push_back("--resume");
  Subprocess& second = StartLocal(resumed_args);
  auto code = second.Wait(std::chrono::seconds(300));
  ASSERT_TRUE(code.has_value()) << second.Output() << LogsTail(40);
  ASSERT_EQ(*code, 0) << second.Output() << LogsTail(40);
  std::string logs = LogsTail(400);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(logs, m, std::regex("took over job resume at revision \\d+: pass (\\d)/4")))
      << logs;
  EXPECT_GE(std::stoi(m[1]), 2) << "the master continued where it was, not from the first pass";
  EXPECT_TRUE(std::regex_search(logs, std::regex("pserver 0: loaded the checkpoint of version [1-9]")))
      << logs;
  EXPECT_TRUE(std::regex_search(logs, std::regex("pserver 1: loaded the checkpoint of version 0\\b")))
      << logs;
  auto r = Result();
  EXPECT_EQ(r["failed_tasks"], 0);
  EXPECT_GE(r["metrics"]["accuracy"].get<double>(), 0.80);
}

}  // namespace
}  // namespace tessera::testing
