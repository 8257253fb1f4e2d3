// PushWidener: a push of plain half-precision values is widened as it comes, in any steps, to the
// values widened at once, with the first non-finite one found on the way; it is taken once, whole,
// by the request it was begun for; anything else (small, float32, coded, mixed types, not a push,
// a malformed header) is not watched.
#include "pserver/push_widener.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "job/wire_codec.h"

namespace tessera {
namespace {

constexpr size_t kWidenedValues = 700001;  // 1.4 MB of bfloat16: past PushWidener::kMinBytes

std::string PushHeader(std::vector<std::pair<wire::DType, wire::Coding>> segs,
                       wire::DataRequest::Op op = wire::DataRequest::DATA) {
  wire::DataRequest req;
  req.set_op(op);
  int64_t block = 0;
  for (const auto& [t, c] : segs) {
    auto* s = req.add_push();
    s->set_param("w");
    s->set_block(block++);
    s->set_count(static_cast<int64_t>(kWidenedValues / segs.size()));
    s->set_dtype(t);
    s->set_coding(c);
  }
  return req.SerializeAsString();
}

class PushWidenerTest : public ::testing::Test {
 protected:
  PushWidenerTest() : values_(kWidenedValues), payload_(kWidenedValues * 2) {
    for (size_t i = 0; i < values_.size(); ++i) values_[i] = static_cast<float>(i % 1013) * 0.25f - 100.0f;
  }
  void Narrow() { NarrowValues(values_, wire::BFLOAT16, payload_.data()); }
  std::vector<float> WidenedAtOnce() const {
    std::vector<float> w(values_.size());
    WidenValues(payload_.data(), w.size(), wire::BFLOAT16, w.data());
    return w;
  }
  std::vector<float> values_;
  std::vector<char> payload_;
  PushWidener widener_;
};

TEST_F(PushWidenerTest, WidenedAsItComesInAnyStepsItIsThePushWidenedAtOnce) {
  Narrow();
  const std::string h = PushHeader({{wire::BFLOAT16, wire::PLAIN}, {wire::BFLOAT16, wire::PLAIN}});
  ASSERT_TRUE(widener_.Begin(h, payload_.size()));
  EXPECT_FALSE(widener_.Take(payload_.size() - 2)) << "another request's size";
  ASSERT_TRUE(widener_.Begin(h, payload_.size()));
  for (size_t bytes : {size_t{1}, size_t{0}, size_t{3}, size_t{262144}, size_t{262145}, size_t{1000001}}) {
    widener_.Arrived(payload_.data(), bytes);
  }
  EXPECT_FALSE(widener_.Take(payload_.size())) << "taken before all of it came";
  ASSERT_TRUE(widener_.Begin(h, payload_.size()));
  widener_.Arrived(payload_.data(), 3);
  widener_.Arrived(payload_.data(), 777777);
  widener_.Arrived(payload_.data(), payload_.size());
  ASSERT_TRUE(widener_.Take(payload_.size()));
  EXPECT_EQ(widener_.dtype(), wire::BFLOAT16);
  EXPECT_EQ(widener_.first_nonfinite(), -1);
  const std::vector<float> want = WidenedAtOnce();
  ASSERT_EQ(widener_.floats()->size(), want.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(widener_.floats()->data(), want.data(), widener_.floats()->size()), 0);
  EXPECT_FALSE(widener_.Take(payload_.size())) << "taken twice";
}

TEST_F(PushWidenerTest, TheFirstNonFiniteValueIsFoundOnTheWay) {
  values_[600000] = std::numeric_limits<float>::infinity();
  values_[650000] = std::nanf("");
  Narrow();
  ASSERT_TRUE(widener_.Begin(PushHeader({{wire::BFLOAT16, wire::PLAIN}}), payload_.size()));
  widener_.Arrived(payload_.data(), 1100000);  // past the infinity
  widener_.Arrived(payload_.data(), payload_.size());
  ASSERT_TRUE(widener_.Take(payload_.size()));
  EXPECT_EQ(widener_.first_nonfinite(), 600000);
}

TEST_F(PushWidenerTest, AnythingButALargePlainHalfPushIsNotWatched) {
  const size_t bytes = payload_.size();
  EXPECT_FALSE(widener_.Begin(PushHeader({{wire::BFLOAT16, wire::PLAIN}}), PushWidener::kMinBytes - 2))
      << "small";
  EXPECT_FALSE(widener_.Begin(PushHeader({{wire::FLOAT32, wire::PLAIN}}), bytes)) << "float32";
  EXPECT_FALSE(widener_.Begin(PushHeader({{wire::BFLOAT16, wire::TOP_K}}), bytes)) << "top-k";
  EXPECT_FALSE(
      widener_.Begin(PushHeader({{wire::BFLOAT16, wire::PLAIN}, {wire::FLOAT16, wire::PLAIN}}), bytes))
      << "two types";
  EXPECT_FALSE(widener_.Begin(PushHeader({}), bytes)) << "no push";
  EXPECT_FALSE(
      widener_.Begin(PushHeader({{wire::BFLOAT16, wire::PLAIN}}, wire::DataRequest::REPLICATE), bytes))
      << "not DATA";
  EXPECT_FALSE(widener_.Begin("\xff\xff\xff", bytes)) << "malformed";
  EXPECT_FALSE(widener_.Begin(PushHeader({{wire::BFLOAT16, wire::PLAIN}}), bytes + 1)) << "half a value";
  EXPECT_TRUE(widener_.Begin(PushHeader({{wire::FLOAT16, wire::PLAIN}}), bytes)) << "float16 is";
  // A request not watched after one that was: nothing of the first is taken for it.
  EXPECT_FALSE(widener_.Begin(PushHeader({{wire::FLOAT32, wire::PLAIN}}), bytes));
  widener_.Arrived(payload_.data(), bytes);
  EXPECT_FALSE(widener_.Take(bytes));
}

}  // namespace
}  // namespace tessera
