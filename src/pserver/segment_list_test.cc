// Unit tests of SegmentList: one table of segment lists (good and bad) for every use, the places
// of each segment's values, and the naming of a value by its position.
#include "pserver/segment_list.h"

#include <gtest/gtest.h>

#include <cstring>

#include "job/wire_codec.h"
#include "pserver/one_shard_for_tests.h"

namespace tessera {
namespace {

using Use = SegmentList::Use;

// One pserver holding everything: "w" (25 floats in blocks of 10) and the table "emb" (rows of 3).
class SegmentListTest : public OneShardTest {
 protected:
  static wire::Segment Dense(const std::string& p, int64_t block, int64_t count) {
    wire::Segment s;
    s.set_param(p);
    s.set_block(block);
    s.set_count(count);
    return s;
  }
  static wire::Segment Sparse(const std::string& p, std::vector<uint64_t> keys, int64_t count = -1) {
    wire::Segment s;
    s.set_param(p);
    s.set_block(-1);
    s.set_count(count < 0 ? static_cast<int64_t>(keys.size()) : count);
    for (uint64_t k : keys) s.add_keys(k);
    return s;
  }
};

TEST_F(SegmentListTest, EveryInconsistencyIsRefusedWithWhatAndWhere) {
  wire::Segment f64 = Dense("w", 0, 10);
  f64.set_dtype(wire::FLOAT64);
  wire::Segment both = Dense("w", 0, 10);
  both.add_keys(7);
  struct Case {
    std::vector<wire::Segment> segs;
    Use use;
    std::string error;  // "" for good
  };
  const std::vector<Case> cases = {
      {{Dense("w", 0, 10), Dense("w", 2, 5)}, Use::kPush, ""},
      {{Sparse("emb", {1, 2}), Dense("w", 1, 10)}, Use::kPush, ""},
      {{Sparse("emb", {1, 2})}, Use::kPull, ""},
      {{Dense("w", 0, 10)}, Use::kInit, ""},
      {{}, Use::kPush, ""},
      {{f64}, Use::kPush, "parameter 'w': dtype FLOAT64 is not supported"},
      {{Dense("nope", 0, 10)}, Use::kPush, "unknown parameter 'nope'"},
      {{Dense("w", 3, 10)}, Use::kPull, "parameter 'w' has blocks 0..2, not block 3"},
      {{Dense("w", 2, 10)}, Use::kPush, "parameter 'w' block 2: expected 5 elements, got 10"},
      {{Dense("emb", 0, 3)}, Use::kPush, "'emb' is a sparse table, not a dense parameter"},
      {{Sparse("w", {1})}, Use::kPush, "'w' is a dense parameter, not a sparse table"},
      {{Sparse("emb", {1, 2}, 3)}, Use::kPush, "sparse segment of 'emb' lists 2 keys but says 3 rows"},
      {{Sparse("emb", {1})}, Use::kInit, "INIT carries dense blocks only"},
      {{both}, Use::kPush, "segment of 'w' names block 0 and sparse keys"},
      {{Dense("w", -2, 0)}, Use::kPush, "names block -2"},
  };
  for (const auto& c : cases) {
    google::protobuf::RepeatedPtrField<wire::Segment> segs(c.segs.begin(), c.segs.end());
    auto list = SegmentList::Read(store_, segs, c.use);
    if (c.error.empty()) {
      EXPECT_TRUE(list.ok()) << list.status();
    } else {
      ASSERT_FALSE(list.ok()) << c.error;
      EXPECT_EQ(list.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(list.status().message().find(c.error), std::string::npos) << list.status().message();
    }
  }
}

TEST_F(SegmentListTest, EverySegmentKnowsWhereItsValuesAreWhateverComesFirst) {
  // A sparse segment first: the dense values after it start past its rows (the INIT bug read
  // dense values from the wrong bytes when a sparse segment came first).
  google::protobuf::RepeatedPtrField<wire::Segment> segs;
  *segs.Add() = Sparse("emb", {5, 6});
  *segs.Add() = Dense("w", 2, 5);
  *segs.Add() = Dense("w", 0, 10);
  auto list = SegmentList::Read(store_, segs, Use::kPush);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->parts().size(), 3u);
  EXPECT_FALSE(list->parts()[0].dense);
  EXPECT_EQ(list->parts()[0].dim, 3);
  EXPECT_EQ(list->parts()[0].offset, 0u);
  EXPECT_EQ(list->parts()[0].floats, 6u);
  EXPECT_EQ(list->parts()[1].offset, 6u);
  EXPECT_EQ(list->parts()[1].floats, 5u);
  EXPECT_EQ(list->parts()[2].offset, 11u);
  EXPECT_EQ(list->floats(), 21u);
  EXPECT_TRUE(list->CheckPayload(84).ok());
  auto wrong = list->CheckPayload(80);
  EXPECT_NE(wrong.message().find("payload has 80 bytes but the header describes 84"), std::string::npos) << wrong;
  EXPECT_EQ(list->Describe(4), "'emb' row of key 6");
  EXPECT_EQ(list->Describe(7), "'w' element 21");  // block 2 element 1: named within the parameter
  EXPECT_EQ(list->Describe(20), "'w' element 9");
  EXPECT_EQ(list->keys(list->parts()[0]).size(), 2u);
  // Moved segments: the list follows them.
  google::protobuf::RepeatedPtrField<wire::Segment> moved;
  moved.Swap(&segs);
  list->Rebind(&moved);
  EXPECT_EQ(list->segment(list->parts()[2]).block(), 0);
}

// A push of plain half-precision values, sparse rows first: widened value by value (as a push
// that came over tcp is, pserver/push_widener.h), it is what Widen makes of it, and Widened leaves
// the list as Widen does. A list with another type or a coded segment is not PlainOf.
TEST_F(SegmentListTest, APlainHalfPushWidenedValueByValueIsWhatWidenMakes) {
  google::protobuf::RepeatedPtrField<wire::Segment> segs;
  *segs.Add() = Sparse("emb", {5, 6});
  *segs.Add() = Dense("w", 2, 5);
  *segs.Add() = Dense("w", 0, 10);
  for (auto& seg : segs) seg.set_dtype(wire::BFLOAT16);
  std::vector<float> values(21);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 3.0f;
  std::vector<char> payload(values.size() * 2);
  NarrowValues(values, wire::BFLOAT16, payload.data());

  auto read = [&](google::protobuf::RepeatedPtrField<wire::Segment>* s) {
    auto list = SegmentList::Read(store_, *s, Use::kPush, /*wire_formats=*/true);
    EXPECT_TRUE(list.ok()) << list.status();
    return *list;
  };
  auto copy = segs;
  SegmentList widen = read(&copy);
  std::string by_widen;
  ASSERT_TRUE(widen.Widen(payload.data(), &copy, &by_widen).ok());

  SegmentList plain = read(&segs);
  EXPECT_TRUE(plain.PlainOf(wire::BFLOAT16));
  EXPECT_FALSE(plain.PlainOf(wire::FLOAT16));
  std::vector<float> by_value(values.size());
  WidenValues(payload.data(), values.size(), wire::BFLOAT16, by_value.data());
  ASSERT_EQ(by_widen.size(), by_value.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(by_widen.data(), by_value.data(), by_widen.size()), 0);
  plain.Widened(&segs);
  EXPECT_FALSE(plain.encoded());
  EXPECT_TRUE(plain.CheckPayload(by_widen.size()).ok());
  for (int i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(segs[i].SerializeAsString(), copy[i].SerializeAsString()) << "segment " << i;
    EXPECT_EQ(plain.parts()[i].wire_offset, widen.parts()[i].wire_offset);
  }

  google::protobuf::RepeatedPtrField<wire::Segment> mixed;
  *mixed.Add() = Dense("w", 0, 10);
  *mixed.Add() = Dense("w", 1, 10);
  mixed[0].set_dtype(wire::BFLOAT16);
  mixed[1].set_dtype(wire::FLOAT16);
  EXPECT_FALSE(read(&mixed).PlainOf(wire::BFLOAT16));
  mixed[1].set_dtype(wire::BFLOAT16);
  mixed[1].set_coding(wire::TOP_K);
  mixed[1].set_nonzeros(2);
  EXPECT_FALSE(read(&mixed).PlainOf(wire::BFLOAT16));
}

}  // namespace
}  // namespace tessera
