#include "coord/keys.h"

#include <gtest/gtest.h>

namespace tessera::keys {
namespace {

TEST(KeysTest, EveryKeyIsUnderTheJob) {
  const std::string job = Job("mnist");
  EXPECT_EQ(job, "/tessera/mnist/");
  for (const std::string& k :
       {Config("mnist"), SlotMap("mnist"), Pserver("mnist", 3), PserverReady("mnist", 3),
        Trainer("mnist", "t1"), MasterElectionPrefix("mnist"), MasterStatePrefix("mnist"),
        Checkpoint("mnist", 0), MetricsPrefix("mnist"), InitLockPrefix("mnist")}) {
    EXPECT_EQ(k.rfind(job, 0), 0u) << k;
  }
  EXPECT_EQ(Pserver("mnist", 3), "/tessera/mnist/pservers/3");
}

TEST(KeysTest, OneJobIsNotAPrefixOfAnother) {
  // "/tessera/a/" must not match keys of job "ab".
  EXPECT_NE(Config("ab").rfind(Job("a"), 0), 0u);
}

TEST(KeysTest, LastElement) {
  EXPECT_EQ(LastElement("/tessera/j/pservers/12"), "12");
  EXPECT_EQ(LastElement("x"), "x");
}

}  // namespace
}  // namespace tessera::keys
