// WireCoder: a push of plain half-precision values is narrowed as it is sent, in any steps, to
// the bytes of the push narrowed at once (others are encoded at once). A reply in half precision
// is checked from its header before any value is written, then widened as its bytes come, each
// value once it has come and none before; a reply of changes (top-k) is applied only once all of
// it has come; Finish writes the rest, or all of it when the transport told nothing; a new
// attempt begins again from the start; a reply that does not answer the pull writes nothing.
#include "client/wire_coder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "job/wire_codec.h"

namespace tessera {
namespace {

constexpr size_t kDecodedBlock =
    200000;  // values a block: 400,000 bytes of bfloat16, past the decoder's stride
constexpr size_t kDecodedSecond = 150000;  // the second (last) block of "w"
constexpr float kNotYetWritten = -1000.0f;

JobConfig OnePserverJob(size_t block_size) {
  JobConfig j;
  j.pservers = 1;
  j.slots = 64;
  j.block_size = static_cast<int64_t>(block_size);
  return j;
}

// Blocks 0 and 1 of "w" (`first` and `second` values) in bfloat16, added to `segments`.
void AddBlocksOfW(google::protobuf::RepeatedPtrField<wire::Segment>* segments, size_t first, size_t second) {
  for (int64_t b : {0, 1}) {
    auto* s = segments->Add();
    s->set_param("w");
    s->set_block(b);
    s->set_count(static_cast<int64_t>(b == 0 ? first : second));
    s->set_dtype(wire::BFLOAT16);
  }
}

class ReplyDecoderTest : public ::testing::Test {
 protected:
  ReplyDecoderTest()
      : builder_(OnePserverJob(kDecodedBlock), SlotMap::RoundRobin(64, 1)),
        coder_(builder_, *WireChoice::Parse("bf16"), static_cast<int64_t>(kDecodedBlock)) {
    EXPECT_TRUE(builder_.AddDense("w", w_.data(), w_.size(), OptimizerConfig{}).ok());
    AddBlocksOfW(call_.req.mutable_pull(), kDecodedBlock, kDecodedSecond);
    *reply_.mutable_pull() = call_.req.pull();
    call_.reply = {{w_.data(), kDecodedBlock * sizeof(float)},
                   {w_.data() + kDecodedBlock, kDecodedSecond * sizeof(float)}};
    std::vector<float> v(w_.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = Value(i);
    bytes_.resize(v.size() * 2);
    NarrowValues(v, wire::BFLOAT16, bytes_.data());
  }
  static float Value(size_t i) { return static_cast<float>(i % 61) - 30.0f; }  // exact in bfloat16
  // The reply's values are written up to element `to`, and nothing from there on.
  void ExpectWritten(size_t to, const char* when) {
    for (size_t i = 0; i < to; ++i) ASSERT_EQ(w_[i], Value(i)) << when << ": element " << i;
    for (size_t i = to; i < w_.size(); ++i) ASSERT_EQ(w_[i], kNotYetWritten) << when << ": element " << i;
  }

  std::vector<float> w_ = std::vector<float>(kDecodedBlock + kDecodedSecond, kNotYetWritten);
  RequestBuilder builder_;
  WireCoder coder_;
  LinkCall call_;
  wire::DataReply reply_;
  std::vector<char> bytes_;
};

TEST_F(ReplyDecoderTest, ValuesAreWrittenAsTheyComeAndTheRestAtFinish) {
  WireCoder::ReplyDecoder d(&coder_, &call_, bytes_.data());
  d.Begin(reply_.SerializeAsString(), bytes_.size());
  ExpectWritten(0, "begun");
  d.Arrived(300001);  // 150,000 values and half of the next
  ExpectWritten(150000, "300,001 bytes");
  d.Arrived(600000);  // all of block 0 and 100,000 of block 1
  ExpectWritten(kDecodedBlock + 100000, "600,000 bytes");
  ASSERT_TRUE(d.Finish(reply_, bytes_.size()).ok());
  ExpectWritten(w_.size(), "finished");
}

TEST_F(ReplyDecoderTest, WhenNothingWasToldFinishWritesItAll) {
  WireCoder::ReplyDecoder d(&coder_, &call_, bytes_.data());
  ASSERT_TRUE(d.Finish(reply_, bytes_.size()).ok());
  ExpectWritten(w_.size(), "finished");
}

TEST_F(ReplyDecoderTest, ANewAttemptBeginsAgainFromTheStart) {
  WireCoder::ReplyDecoder d(&coder_, &call_, bytes_.data());
  d.Begin(reply_.SerializeAsString(), bytes_.size());
  d.Arrived(300000);
  ExpectWritten(150000, "the first attempt");
  std::fill(w_.begin(), w_.end(), kNotYetWritten);  // the retry's reply lands from its first byte again
  d.Begin(reply_.SerializeAsString(), bytes_.size());
  d.Arrived(300000);
  ExpectWritten(150000, "the second attempt");
  ASSERT_TRUE(d.Finish(reply_, bytes_.size()).ok());
  ExpectWritten(w_.size(), "finished");
}

TEST_F(ReplyDecoderTest, AReplyThatDoesNotAnswerThePullWritesNothing) {
  reply_.mutable_pull(1)->set_count(static_cast<int64_t>(kDecodedSecond - 1));
  WireCoder::ReplyDecoder d(&coder_, &call_, bytes_.data());
  d.Begin(reply_.SerializeAsString(), bytes_.size());
  d.Arrived(bytes_.size());
  ExpectWritten(0, "told all of it");
  Status s = d.Finish(reply_, bytes_.size());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  ExpectWritten(0, "finished");
}

// Block 0 comes as changes: 150,000 indices and their values, applied once all have come.
TEST_F(ReplyDecoderTest, AReplyOfChangesIsAppliedOnceAllOfItHasCome) {
  constexpr size_t k = 150000;
  auto* s = reply_.mutable_pull(0);
  s->set_coding(wire::TOP_K);
  s->set_nonzeros(static_cast<int64_t>(k));
  std::vector<char> bytes(k * 6);
  std::vector<uint16_t> values(k);
  for (size_t j = 0; j < k; ++j) {
    const auto at = static_cast<uint32_t>(j);
    std::memcpy(bytes.data() + j * 4, &at, 4);
    values[j] = ToBfloat16(Value(j));
  }
  std::memcpy(bytes.data() + k * 4, values.data(), k * 2);
  bytes.insert(bytes.end(), bytes_.begin() + kDecodedBlock * 2, bytes_.end());  // block 1, plain
  WireCoder::ReplyDecoder d(&coder_, &call_, bytes.data());
  d.Begin(reply_.SerializeAsString(), bytes.size());
  d.Arrived(k * 6 - 1);
  ExpectWritten(0, "all but the last byte of the changes");
  d.Arrived(k * 6 + 300000);
  for (size_t i = 0; i < k; ++i) ASSERT_EQ(w_[i], Value(i)) << "changed element " << i;
  for (size_t i = k; i < kDecodedBlock; ++i) ASSERT_EQ(w_[i], kNotYetWritten) << "unchanged element " << i;
  for (size_t i = 0; i < 150000; ++i)
    ASSERT_EQ(w_[kDecodedBlock + i], Value(kDecodedBlock + i)) << "block 1 element " << i;
  ASSERT_EQ(w_[kDecodedBlock + 150000 - 1], Value(kDecodedBlock + 150000 - 1));
  ASSERT_TRUE(d.Finish(reply_, bytes.size()).ok());
}

// A push of plain half-precision values is narrowed as it is sent (NarrowedPush): made in any
// steps, it holds the bytes of the push narrowed at once, each value made once; a push whose
// gradients a segment spans two buffers of, or one of top-k, is encoded at once instead.
class NarrowedPushTest : public ::testing::Test {
 protected:
  static constexpr size_t kFirst = 200000, kSecond = 150001;  // values of w's two blocks
  NarrowedPushTest()
      : builder_(OnePserverJob(kFirst), SlotMap::RoundRobin(64, 1)),
        coder_(builder_, *WireChoice::Parse("bf16"), static_cast<int64_t>(kFirst)) {
    EXPECT_TRUE(builder_.AddDense("w", w_.data(), w_.size(), OptimizerConfig{}).ok());
    for (size_t i = 0; i < g_.size(); ++i) g_[i] = static_cast<float>(i % 977) * 0.37f - 150.0f;
    AddBlocksOfW(call_.req.mutable_push(), kFirst, kSecond);
    call_.req.set_op(wire::DataRequest::DATA);
    call_.payload = {{g_.data(), kFirst * sizeof(float)}, {g_.data() + kFirst, kSecond * sizeof(float)}};
    want_.resize(g_.size() * 2);
    NarrowValues(g_, wire::BFLOAT16, want_.data());
  }

  std::vector<float> w_ = std::vector<float>(kFirst + kSecond, 0.0f);
  std::vector<float> g_ = std::vector<float>(kFirst + kSecond);
  RequestBuilder builder_;
  WireCoder coder_;
  LinkCall call_;
  std::vector<char> want_;
};

TEST_F(NarrowedPushTest, MadeInAnyStepsItHoldsThePushNarrowedAtOnce) {
  ASSERT_TRUE(coder_.Encode(&call_).ok());
  ASSERT_NE(call_.wire_stream, nullptr);
  EXPECT_TRUE(call_.wire_payload.empty());
  NarrowedPush& push = *call_.wire_stream;
  ASSERT_EQ(push.size(), want_.size());
  // Odd places, inside a value, across the blocks' border, backwards (nothing), past the end.
  for (size_t upto :
       {size_t{1}, size_t{3}, size_t{0}, size_t{399999}, size_t{400001}, size_t{2}, size_t{700000}}) {
    push.Fill(upto);
    ASSERT_EQ(std::memcmp(push.data(), want_.data(), upto + (upto % 2)), 0) << "made up to " << upto;
  }
  // What was made is not made again: the gradients changed now show only past it.
  g_.front() = 1e6f;
  push.Fill(want_.size() + 100);
  ASSERT_EQ(std::memcmp(push.data(), want_.data(), want_.size()), 0);
  // A retried call encodes nothing again.
  ASSERT_TRUE(coder_.Encode(&call_).ok());
  EXPECT_EQ(&*call_.wire_stream, &push);
}

TEST_F(NarrowedPushTest, GradientsASegmentSpansTwoBuffersOfAreNarrowedAtOnce) {
  call_.payload = {{g_.data(), 1000 * sizeof(float)}, {g_.data() + 1000, (g_.size() - 1000) * sizeof(float)}};
  ASSERT_TRUE(coder_.Encode(&call_).ok());
  EXPECT_EQ(call_.wire_stream, nullptr);
  ASSERT_EQ(call_.wire_payload.size(), want_.size());
  EXPECT_EQ(std::memcmp(call_.wire_payload.data(), want_.data(), want_.size()), 0);
}

TEST_F(NarrowedPushTest, TopKIsEncodedAtOnce) {
  call_.req.mutable_push(1)->set_coding(wire::TOP_K);
  ASSERT_TRUE(coder_.Encode(&call_).ok());
  EXPECT_EQ(call_.wire_stream, nullptr);
  EXPECT_GT(call_.wire_payload.size(), kFirst * 2);
}

TEST_F(NarrowedPushTest, TooFewGradientsAreRefusedAsBefore) {
  call_.payload.pop_back();
  Status s = coder_.Encode(&call_);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(call_.wire_stream, nullptr);
}

}  // namespace
}  // namespace tessera
