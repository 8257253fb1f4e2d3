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

TEST(CheckpointChoiceTest, EveryCombinationOfAChainOfBaseAndTwoDeltas) {
  // Newest: delta d2 on [b, d1]; the one before: delta d1 on [b].
  const CheckpointLink b{"b", "db", 10, 1000}, d1{"d1", "dd1", 20, 10};
  const CheckpointRecord older{"d1", "dd1", 20, 2000, 10, {b}}, newer{"d2", "dd2", 30, 3000, 12, {b, d1}};
  const State all[] = {State::kMissing, State::kCorrupt, State::kGood};
  for (State sb : all) {
    for (State s1 : all) {
      for (State s2 : all) {
        std::map<std::string, State> files{{"b", sb}, {"d1", s1}, {"d2", s2}};
        SCOPED_TRACE(testing::Message() << "base " << int(sb) << " d1 " << int(s1) << " d2 " << int(s2));
        auto c = ChooseCheckpoint({newer, older}, files);
        if (sb == State::kGood && s1 == State::kGood && s2 == State::kGood) {
          ASSERT_TRUE(c.load);
          EXPECT_EQ(*c.load, newer);
        } else if (sb == State::kGood && s1 == State::kGood) {
          ASSERT_TRUE(c.load);
          EXPECT_EQ(*c.load, older);
          ASSERT_EQ(c.refused.size(), 1u);
          EXPECT_NE(c.refused[0].find("its file"), std::string::npos) << c.refused[0];
        } else {
          EXPECT_FALSE(c.load);
          ASSERT_EQ(c.refused.size(), 2u);
          // Each refusal names the first bad file of its chain, base first.
          const std::string first_bad = sb != State::kGood ? "its base b" : "its delta d1 (version 20)";
          EXPECT_NE(c.refused[0].find(first_bad), std::string::npos) << c.refused[0];
          EXPECT_NE(c.refused[1].find(sb != State::kGood ? "its base b" : "its file"), std::string::npos)
              << c.refused[1];
        }
      }
    }
  }
}

TEST(CheckpointChoiceTest, ChainsRoundTripAndListTheirFilesBaseFirst) {
  const CheckpointRecord base{"b", "db", 10, 1000, 500};
  const CheckpointRecord delta{"d", "dd", 20, 2000, 50, {{"b", "db", 10, 500}}};
  auto back = DecodeCheckpointRecords(EncodeCheckpointRecords({delta, base}));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0], delta);
  EXPECT_EQ((*back)[1], base);
  EXPECT_TRUE((*back)[0].delta());
  EXPECT_FALSE((*back)[1].delta());
  auto files = delta.Files();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].uuid, "b");
  EXPECT_EQ(files[1].uuid, "d");
  // A record without "chain" (written before deltas existed) is a whole checkpoint.
  auto old = DecodeCheckpointRecords(R"({"checkpoints": [{"uuid": "a", "digest": "x", "version": 3}]})");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE((*old)[0].delta());
  EXPECT_EQ(
      DecodeCheckpointRecords(R"({"checkpoints": [{"uuid": "a", "digest": "x", "version": 3, "chain": 5}]})")
          .status()
          .code(),
      StatusCode::kDataLoss);
  EXPECT_EQ(DecodeCheckpointRecords(
                R"({"checkpoints": [{"uuid": "a", "digest": "x", "version": 3, "chain": [{}]}]})")
                .status()
                .code(),
            StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tessera
