// Unit tests of CheckpointView: the console's digest state of every checkpoint record, over real
// files in a temp directory.
#include "master/checkpoint_view.h"

#include <gtest/gtest.h>

#include "checkpoint/checkpoint_probe.h"
#include "common/digest.h"
#include "common/files.h"

namespace tessera::master {
namespace {

class CheckpointViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = MakeTempDir("checkpoint-view-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override { (void)RemoveAll(dir_); }
  // A record (and, with `contents`, its file) of pserver 1 of job "j".
  nlohmann::json Record(const std::string& uuid, const std::string& digest, const std::string* contents) {
    if (contents) {
      EXPECT_TRUE(WriteFileAtomic(CheckpointPath(dir_, "j", 1, uuid), *contents).ok());
    }
    return {{"uuid", uuid}, {"digest", digest}, {"version", 7}};
  }
  static std::string Value(const nlohmann::json& records) {
    return nlohmann::json{{"checkpoints", records}}.dump();
  }

  std::string dir_;
};

TEST_F(CheckpointViewTest, EachRecordSaysWhetherItsFileMatches) {
  const std::string good = "good bytes", bad = "damaged bytes";
  nlohmann::json records =
      nlohmann::json::array({Record("u-good", Sha256Hex(good), &good), Record("u-bad", Sha256Hex(good), &bad),
                             Record("u-gone", "00", nullptr)});
  CheckpointView view;
  auto out = view.Records("j", 1, Value(records), dir_);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["digest_state"], "verified");
  EXPECT_EQ(out[1]["digest_state"], "digest mismatch");
  EXPECT_EQ(out[2]["digest_state"], "file missing");
  EXPECT_EQ(out[0]["version"], 7);  // the record's own fields pass through
}

TEST_F(CheckpointViewTest, ADeltaIsVerifiedOnlyWithEveryFileOfItsChain) {
  const std::string base = "base", d1 = "delta one", d2 = "delta two";
  auto link = [&](const std::string& uuid, const std::string& bytes) {
    return nlohmann::json{{"uuid", uuid}, {"digest", Sha256Hex(bytes)}, {"version", 1}};
  };
  nlohmann::json rec = Record("d2", Sha256Hex(d2), &d2);
  rec["chain"] = nlohmann::json::array({link("b", base), link("d1", d1)});
  ASSERT_TRUE(WriteFileAtomic(CheckpointPath(dir_, "j", 1, "b"), base).ok());
  ASSERT_TRUE(WriteFileAtomic(CheckpointPath(dir_, "j", 1, "d1"), "damaged").ok());
  auto out = CheckpointView().Records("j", 1, Value(nlohmann::json::array({rec})), dir_);
  EXPECT_EQ(out[0]["digest_state"], "delta 1: digest mismatch");
  ASSERT_TRUE(WriteFileAtomic(CheckpointPath(dir_, "j", 1, "d1"), d1).ok());
  EXPECT_EQ(CheckpointView().Records("j", 1, Value(nlohmann::json::array({rec})), dir_)[0]["digest_state"],
            "verified");
  ASSERT_TRUE(RemoveAll(CheckpointPath(dir_, "j", 1, "b")).ok());
  EXPECT_EQ(CheckpointView().Records("j", 1, Value(nlohmann::json::array({rec})), dir_)[0]["digest_state"],
            "base: file missing");
}

TEST_F(CheckpointViewTest, ADirectoryTheMasterCannotSeeIsSaidSoAndLookedAtAgainLater) {
  const std::string good = "bytes";
  nlohmann::json records = nlohmann::json::array({Record("u1", Sha256Hex(good), nullptr)});
  CheckpointView view;
  EXPECT_EQ(view.Records("j", 1, Value(records), "")[0]["digest_state"], "not visible from the master");
  EXPECT_EQ(view.Records("j", 1, Value(records), dir_ + "/elsewhere")[0]["digest_state"],
            "not visible from the master");
  // Once the directory is visible (and the file there), the record is verified.
  ASSERT_TRUE(WriteFileAtomic(CheckpointPath(dir_, "j", 1, "u1"), good).ok());
  EXPECT_EQ(view.Records("j", 1, Value(records), dir_)[0]["digest_state"], "verified");
}

TEST_F(CheckpointViewTest, AFileIsHashedOnceAndUnreadableValuesGiveNoRecords) {
  const std::string good = "bytes";
  nlohmann::json records = nlohmann::json::array({Record("u1", Sha256Hex(good), &good)});
  CheckpointView view;
  EXPECT_EQ(view.Records("j", 1, Value(records), dir_)[0]["digest_state"], "verified");
  // A recorded file never changes: its state is remembered, not recomputed.
  ASSERT_TRUE(WriteFileAtomic(CheckpointPath(dir_, "j", 1, "u1"), "changed behind our back").ok());
  EXPECT_EQ(view.Records("j", 1, Value(records), dir_)[0]["digest_state"], "verified");
  EXPECT_TRUE(view.Records("j", 1, "not json", dir_).empty());
  EXPECT_TRUE(view.Records("j", 1, R"({"checkpoints": 5})", dir_).empty());
}

}  // namespace
}  // namespace tessera::master
