// `tessera job create|show|delete` against a real etcd.
#include <gtest/gtest.h>

#include "ps/ps_fixture.h"

namespace tessera::testing {
namespace {

struct Out {
  int code;
  std::string text;
};

class CliJobTest : public PsTest {
 protected:
  Out Tessera(std::vector<std::string> args) {
    SpawnOptions o;
    o.argv = {BuildPath("src/tessera")};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.log_path = dir_ + "/cli" + std::to_string(runs_++) + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok());
    auto code = (*p)->Wait(std::chrono::seconds(60));
    return {code.value_or(-1), (*p)->Output()};
  }
  int runs_ = 0;
};

TEST_F(CliJobTest, CreateShowRefuseDuplicateAndDelete) {
  const std::string e = server_->endpoint();
  auto created = Tessera({"job", "create", "--etcd", e, "--job", "j", "--pservers", "3", "--mode", "ssp:2",
                          "--optimizer", "adam:lr=0.001", "--slots", "96"});
  ASSERT_EQ(created.code, 0) << created.text;
  auto cfg = JobConfig::FromJson(client_->Get(keys::Config("j"))->kvs[0].value);
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->pservers, 3);
  EXPECT_EQ(cfg->mode.ToString(), "ssp:2");
  EXPECT_EQ(cfg->optimizer.type, OptimizerConfig::Type::kAdam);
  EXPECT_FALSE(cfg->token.empty());
  auto map = SlotMap::FromJson(client_->Get(keys::SlotMap("j"))->kvs[0].value);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->slots(), 96);

  auto show = Tessera({"job", "show", "--etcd", e, "--job", "j"});
  EXPECT_EQ(show.code, 0);
  EXPECT_NE(show.text.find("ssp:2"), std::string::npos) << show.text;
  EXPECT_NE(show.text.find("pserver 2: 32 slots"), std::string::npos) << show.text;

  auto dup = Tessera({"job", "create", "--etcd", e, "--job", "j", "--pservers", "1"});
  EXPECT_EQ(dup.code, 1);
  EXPECT_NE(dup.text.find("already exists"), std::string::npos) << dup.text;
  EXPECT_EQ(JobConfig::FromJson(client_->Get(keys::Config("j"))->kvs[0].value)->pservers, 3);  // untouched

  auto del = Tessera({"job", "delete", "--etcd", e, "--job", "j"});
  EXPECT_EQ(del.code, 0) << del.text;
  EXPECT_TRUE(client_->Get(keys::Config("j"))->kvs.empty());
  auto gone = Tessera({"job", "show", "--etcd", e, "--job", "j"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.text.find("does not exist"), std::string::npos);
}

TEST_F(CliJobTest, BadFlagsAreRefusedClearly) {
  const std::string e = server_->endpoint();
  auto mode = Tessera({"job", "create", "--etcd", e, "--job", "j", "--mode", "bsp"});
  EXPECT_EQ(mode.code, 1);
  EXPECT_NE(mode.text.find("unknown mode 'bsp'"), std::string::npos) << mode.text;
  auto opt = Tessera({"job", "create", "--etcd", e, "--job", "j", "--optimizer", "adam:lr=-1"});
  EXPECT_NE(opt.text.find("lr must be a positive number"), std::string::npos) << opt.text;
  auto slots = Tessera({"job", "create", "--etcd", e, "--job", "j", "--pservers", "8", "--slots", "4"});
  EXPECT_NE(slots.text.find("slots must be at least"), std::string::npos) << slots.text;
  EXPECT_TRUE(client_->Get(keys::Config("j"))->kvs.empty());
  auto help = Tessera({"job", "create", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.text.find("--min-trainers"), std::string::npos);
}

}  // namespace
}  // namespace tessera::testing
