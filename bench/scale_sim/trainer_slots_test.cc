// Trainer regions: two mappings of one file see each other's writes (as the simulator and a
// trainer host do), and a file that is not a region is refused.
#include "trainer_slots.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/files.h"

namespace tessera::bench {
namespace {

class TrainerSlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = MakeTempDir("trainer-slots-");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dir_ = *d;
  }
  void TearDown() override { (void)RemoveAll(dir_); }
  std::string dir_;
};

TEST_F(TrainerSlotsTest, TwoMappingsOfARegionShareItsSlots) {
  auto made = MappedRegion::Create(dir_ + "/r", 3);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto opened = MappedRegion::Open(dir_ + "/r");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->capacity.load(), 3);
  (*made)->wanted = 2;
  (*opened)->slots[2].first_record_ms = 1234;
  const std::string why = "Unavailable: cannot reach etcd";
  std::copy(why.begin(), why.end(), (*opened)->slots[1].error);
  (*opened)->slots[1].failed = 1;
  (*opened)->slots[1].done = 1;
  (*made)->slots[0].stop = 1;
  EXPECT_EQ((*opened)->wanted.load(), 2);
  EXPECT_TRUE((*made)->slots[2].training());
  EXPECT_FALSE((*made)->slots[0].training());
  EXPECT_EQ((*opened)->slots[0].stop.load(), 1);
  EXPECT_TRUE((*made)->slots[0].Error().ok()) << "a trainer still running has no error";
  EXPECT_EQ((*made)->slots[1].Error().message(), why);
}

TEST_F(TrainerSlotsTest, AFileThatIsNotARegionIsRefused) {
  std::ofstream(dir_ + "/short") << "x";
  auto r = MappedRegion::Open(dir_ + "/short");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a trainer region"), std::string::npos) << r.status().ToString();
  auto missing = MappedRegion::Open(dir_ + "/none");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir_ + "/none"), std::string::npos)
      << missing.status().ToString();
  EXPECT_FALSE(MappedRegion::Create(dir_ + "/zero", 0).ok());
}

TEST_F(TrainerSlotsTest, AnAnonymousRegionStartsZeroed) {
  auto r = MappedRegion::Create("", 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->capacity.load(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE((*r)->slots[i].ended());
    EXPECT_EQ((*r)->slots[i].started_ms.load(), 0);
  }
}

}  // namespace
}  // namespace tessera::bench
