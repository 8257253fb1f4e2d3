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
  o.store = "/tmp/store";
  o.dataset = "d";
  o.eval_dataset = "e";
  o.model = "mlp";
  o.model_args = {"hidden=8"};
  o.checkpoint_every = 2.5;
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
  o.trainers = 1;
  o.pservers = 1;
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
    o.trainers = 100000;
    EXPECT_EQ(TrainerEnv(o, "e:1", 0).at("TESSERA_BUSY_POLL_US"), "0") << "more processes than cores";
    argv = PserverArgv(o, "e:1", false, 0);
    at = std::find(argv.begin(), argv.end(), "--busy-poll-us");
    ASSERT_NE(at, argv.end());
    EXPECT_EQ(*(at + 1), "0");
  }
}

}  // namespace
}  // namespace tessera::local
