// The command lines tessera local writes for its children name only flags that the `tessera`
// command accepts: each child's argv (every optional flag turned on) against the real binary's
// `--help`.
#include "local/child_commands.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "common/files.h"
#include "common/process.h"
#include "common/strings.h"

namespace tessera::local {
namespace {

std::string Help(const std::string& bin, const std::string& command) {
  auto dir = MakeTempDir("child-commands-");
  EXPECT_TRUE(dir.ok());
  ProcessOptions o;
  o.argv = {bin, command, "--help"};
  o.log_path = *dir + "/help";
  auto p = Process::Spawn(o);
  EXPECT_TRUE(p.ok()) << p.status();
  auto code = (*p)->Wait(std::chrono::seconds(60));
  EXPECT_EQ(code.value_or(-1), 0) << command;
  std::string out = (*p)->Output();
  (void)RemoveAll(*dir);
  return out;
}

// Every "--flag" of `argv` (after the program and its subcommand) is in the subcommand's help.
void ExpectAccepted(const std::vector<std::string>& argv) {
  ASSERT_GE(argv.size(), 2u);
  const std::string help = Help(argv[0], argv[1]);
  int flags = 0;
  for (size_t i = 2; i < argv.size(); ++i) {
    if (!StartsWith(argv[i], "--")) continue;
    ++flags;
    EXPECT_NE(help.find(argv[i] + " "), std::string::npos) << "`tessera " << argv[1] << "` has no " << argv[i];
  }
  EXPECT_GT(flags, 2) << argv[1];
}

TEST(ChildCommandsTest, EveryFlagTesseraLocalWritesIsOneTheCommandReads) {
  const char* build = std::getenv("TESSERA_BUILD_DIR");
  ASSERT_NE(build, nullptr);
  LocalOptions o;
  o.tessera_bin = std::string(build) + "/src/tessera";
  o.run_dir = "/tmp/run";
  o.spec.store.path = "/tmp/store";
  o.spec.dataset = "d";
  o.spec.eval_dataset = "e";
  o.spec.model = "mlp";
  o.spec.model_args = {"hidden=8"};
  o.spec.checkpoint_every = 2.5;
  o.busy_poll_us = 250;
  ExpectAccepted(PserverArgv(o, "127.0.0.1:2379", /*with_checkpoints=*/true, 1));
  ExpectAccepted(MasterArgv(o, "127.0.0.1:2379"));
  ExpectAccepted(TrainerArgv(o));
}

// --busy-poll-us reaches both ends: the pservers' flag and the trainers' TESSERA_BUSY_POLL_US;
// without it the choice is the machine's (or the environment's, left to be inherited).
TEST(ChildCommandsTest, BusyPollingReachesThePserversAndTheTrainers) {
  LocalOptions o;
  o.tessera_bin = "/bin/tessera";
  o.spec.trainers_max = 1;
  o.spec.pservers = 1;
  o.busy_poll_us = 250;
  auto argv = PserverArgv(o, "e:1", false, 0);
  auto at = std::find(argv.begin(), argv.end(), "--busy-poll-us");
  ASSERT_NE(at, argv.end());
  ASSERT_NE(at + 1, argv.end());
  EXPECT_EQ(*(at + 1), "250");
  EXPECT_EQ(TrainerEnv(o, "e:1", 0).at("TESSERA_BUSY_POLL_US"), "250");
  o.busy_poll_us = 0;
  EXPECT_EQ(TrainerEnv(o, "e:1", 0).at("TESSERA_BUSY_POLL_US"), "0");

  o.busy_poll_us = -1;  // the machine's choice, unless the environment made it
  if (std::getenv("TESSERA_BUSY_POLL_US") == nullptr) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    EXPECT_EQ(TrainerEnv(o, "e:1", 0).at("TESSERA_BUSY_POLL_US"), 2 <= cores ? "1000" : "0");
    o.spec.trainers_max = 100000;
    EXPECT_EQ(TrainerEnv(o, "e:1", 0).at("TESSERA_BUSY_POLL_US"), "0") << "more processes than cores";
    argv = PserverArgv(o, "e:1", false, 0);
    at = std::find(argv.begin(), argv.end(), "--busy-poll-us");
    ASSERT_NE(at, argv.end());
    EXPECT_EQ(*(at + 1), "0");
  }
}

// A built-in trainer takes the job's lease TTL from its environment (TESSERA_LEASE_TTL), which is
// how `tessera local`, `tessera launch` and the pods of `tessera deploy k8s` all give it
// (spec::TrainerEnv): its command line does not carry it. Before, only `tessera local` passed
// --lease-ttl, and a launched or deployed trainer kept the default of 10 s whatever the spec said.
TEST(ChildCommandsTest, TheTrainerReadsTheLeaseTtlItsEnvironmentGives) {
  const char* build = std::getenv("TESSERA_BUILD_DIR");
  ASSERT_NE(build, nullptr);
  LocalOptions o;
  o.tessera_bin = std::string(build) + "/src/tessera";
  o.spec.model = "mlp";
  o.spec.lease_ttl = 7;
  EXPECT_EQ(TrainerEnv(o, "e:1", 0).at("TESSERA_LEASE_TTL"), "7");
  const std::vector<std::string> argv = TrainerArgv(o);
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--lease-ttl"), argv.end());
  const std::string help = Help(o.tessera_bin, "train");
  const size_t flag = help.find("--lease-ttl");
  ASSERT_NE(flag, std::string::npos);
  EXPECT_NE(help.find("TESSERA_LEASE_TTL", flag), std::string::npos) << help;
}

// tessera local's children are the spec's roles (spec/role_argv.h) plus where they run: the
// settings come through the spec, so a setting of the spec reaches them without this file.
TEST(ChildCommandsTest, TheChildrenAreTheSpecsRoles) {
  LocalOptions o;
  o.tessera_bin = "/bin/tessera";
  o.run_dir = "/tmp/run";
  o.spec.store.path = "/s";
  o.spec.dataset = "d";
  o.spec.model = "mlp";
  o.spec.passes = 3;
  o.spec.task_timeout = 12.5;
  o.spec.checkpoint_steps = 4;
  o.spec.transport = "tcp";
  auto has = [](const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
    auto at = std::find(argv.begin(), argv.end(), flag);
    return at != argv.end() && at + 1 != argv.end() && *(at + 1) == value;
  };
  const auto master = MasterArgv(o, "e:1");
  EXPECT_EQ(master[0], "/bin/tessera");
  EXPECT_EQ(master[1], "master");
  EXPECT_TRUE(has(master, "--passes", "3"));
  EXPECT_TRUE(has(master, "--task-timeout", "12.5"));
  EXPECT_TRUE(has(master, "--history-file", "/tmp/run/history.jsonl"));
  EXPECT_TRUE(has(master, "--etcd", "e:1"));
  EXPECT_EQ(std::find(master.begin(), master.end(), "--listen"), master.end()) << "loopback: the default";
  const auto ps = PserverArgv(o, "e:1", /*with_checkpoints=*/true, 2);
  EXPECT_EQ(ps[1], "pserver");
  EXPECT_TRUE(has(ps, "--transport", "tcp"));
  EXPECT_TRUE(has(ps, "--index", "2"));
  EXPECT_EQ(std::count(ps.begin(), ps.end(), "--checkpoint-dir"), 1);
  EXPECT_TRUE(has(ps, "--checkpoint-dir", "/tmp/run/checkpoints"));
  // A resumed run without checkpoint settings still loads what its earlier run kept.
  o.spec.checkpoint_steps = 0;
  EXPECT_TRUE(
      has(PserverArgv(o, "e:1", /*with_checkpoints=*/true, 0), "--checkpoint-dir", "/tmp/run/checkpoints"));
  const auto ps_plain = PserverArgv(o, "e:1", /*with_checkpoints=*/false, 0);
  EXPECT_EQ(std::find(ps_plain.begin(), ps_plain.end(), "--checkpoint-dir"), ps_plain.end());
  // A user's command runs as given (--trainer-cmd gives it as /bin/sh -c CMD).
  o.spec.model.clear();
  o.spec.command = {"/bin/sh", "-c", "python3 train.py"};
  EXPECT_EQ(TrainerArgv(o), (std::vector<std::string>{"/bin/sh", "-c", "python3 train.py"}));
}

}  // namespace
}  // namespace tessera::local
