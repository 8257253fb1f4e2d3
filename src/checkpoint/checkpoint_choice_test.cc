// Checkpoint choice over every combination of missing, corrupt and good files, and the record
// encoding.
#include "checkpoint/checkpoint_choice.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

using State = CheckpointFileState;

TEST(CheckpointChoiceTest, EveryCombinationOfTwoRecords) {
  const CheckpointRecord newer{"b", "db", 20, 2000}, older{"a", "da", 10, 1000};
  for (State sn : {State::kMissing, State::kCorrupt, State::kGood}) {
    for (State so : {State::kMissing, State::kCorrupt, State::kGood}) {
      std::map<std::string, State> files;
      if (sn != State::kMissing) files["b"] = sn;
      if (so != State::kMissing) files["a"] = so;
      // The record order in etcd must not matter: the newest version wins.
      for (bool newest_first : {true, false}) {
        std::vector<CheckpointRecord> recs =
            newest_first ? std::vector{newer, older} : std::vector{older, newer};
        auto c = ChooseCheckpoint(recs, files);
        SCOPED_TRACE(testing::Message() << "newer " << int(sn) << " older " << int(so));
        if (sn == State::kGood) {
          ASSERT_TRUE(c.load);
          EXPECT_EQ(*c.load, newer);
          EXPECT_TRUE(c.refused.empty());
        } else if (so == State::kGood) {
          ASSERT_TRUE(c.load);
          EXPECT_EQ(*c.load, older);
          ASSERT_EQ(c.refused.size(), 1u);
          EXPECT_NE(c.refused[0].find(sn == State::kMissing ? "missing" : "digest"), std::string::npos)
              << c.refused[0];
          EXPECT_NE(c.refused[0].find("version 20"), std::string::npos);
        } else {
          EXPECT_FALSE(c.load);
          EXPECT_EQ(c.refused.size(), 2u);
        }
      }
    }
  }
}

TEST(CheckpointChoiceTest, NoRecordsMeansNothingToLoad) {
  auto c = ChooseCheckpoint({}, {{"x", State::kGood}});
  EXPECT_FALSE(c.load);
  EXPECT_TRUE(c.refused.empty());
}

TEST(CheckpointChoiceTest, RecordsKeepTheNewestTwoAndRoundTrip) {
  std::vector<CheckpointRecord> r;
  for (int i = 1; i <= 4; ++i) r = WithNewCheckpoint(r, {"u" + std::to_string(i), "d", i * 10, i});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].uuid, "u4");
  EXPECT_EQ(r[1].uuid, "u3");
  auto back = DecodeCheckpointRecords(EncodeCheckpointRecords(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(DecodeCheckpointRecords("{\"checkpoints\": [{\"uuid\": 3}]}").status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(DecodeCheckpointRecords("garbage").status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tessera
