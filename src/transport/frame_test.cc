// Frame preamble: round trip, and every way a preamble can be wrong is refused with a message.
#include "transport/frame.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tessera {
namespace {

TEST(FrameTest, PreambleRoundTrips) {
  for (FrameKind kind : {FrameKind::kRequest, FrameKind::kReply}) {
    for (uint64_t payload : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 20, uint64_t{2} << 30}) {
      FramePreamble p{kind, kFrameFlagNewRegion, 0x0123456789abcdefULL, 4096, payload};
      uint8_t buf[kFramePreambleBytes];
      EncodePreamble(p, buf);
      auto d = DecodePreamble(buf, FrameLimits{});
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->kind, kind);
      EXPECT_EQ(d->flags, kFrameFlagNewRegion);
      EXPECT_EQ(d->request_id, 0x0123456789abcdefULL);
      EXPECT_EQ(d->header_len, 4096u);
      EXPECT_EQ(d->payload_len, payload);
    }
  }
}

TEST(FrameTest, WireLayoutIsLittleEndianAndFixed) {
  uint8_t buf[kFramePreambleBytes];
  EncodePreamble({FrameKind::kReply, 0, 7, 3, 258}, buf);
  // The last 16 bytes are the MAC, zero until FrameAuth::Sign fills them in.
  const uint8_t want[kFramePreambleBytes] = {'T', 'S', 'D', '2', 2, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0,
                                             3,   0,   0,   0,   0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(std::memcmp(buf, want, sizeof buf), 0);
}

struct BadCase {
  const char* what;
  size_t offset;
  uint8_t value;
  const char* message;
};

TEST(FrameTest, EveryMalformedPreambleIsRefusedSayingWhy) {
  const BadCase cases[] = {
      {"magic", 0, 'X', "bad frame magic"},
      {"magic last byte", 3, '1', "bad frame magic"},
      {"kind 0", 4, 0, "unknown frame kind 0"},
      {"kind 3", 4, 3, "unknown frame kind 3"},
      {"flags", 5, 16, "unknown frame flags"},
      {"reserved 6", 6, 1, "reserved"},
      {"reserved 7", 7, 1, "reserved"},
      {"reserved 20", 20, 1, "reserved"},
      {"reserved 23", 23, 1, "reserved"},
      {"header length", 19, 0x80, "frame header of"},
      {"payload length", 31, 0x01, "frame payload of"},
  };
  for (const auto& c : cases) {
    uint8_t buf[kFramePreambleBytes];
    EncodePreamble({FrameKind::kRequest, 0, 1, 10, 10}, buf);
    buf[c.offset] = c.value;
    auto d = DecodePreamble(buf, FrameLimits{});
    ASSERT_FALSE(d.ok()) << c.what;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(d.status().message().find(c.message), std::string::npos)
        << c.what << ": " << d.status().message();
  }
}

TEST(FrameTest, LimitsAreInclusive) {
  FrameLimits l{100, 1000};
  uint8_t buf[kFramePreambleBytes];
  EncodePreamble({FrameKind::kRequest, 0, 1, 100, 1000}, buf);
  EXPECT_TRUE(DecodePreamble(buf, l).ok());
  EncodePreamble({FrameKind::kRequest, 0, 1, 101, 1000}, buf);
  EXPECT_FALSE(DecodePreamble(buf, l).ok());
  EncodePreamble({FrameKind::kRequest, 0, 1, 100, 1001}, buf);
  auto d = DecodePreamble(buf, l);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("larger than the maximum 1000"), std::string::npos) << d.status();
}

TEST(FrameTest, RandomBytesNeverDecodeIntoAnythingPastTheLimits) {
  uint64_t x = 88172645463325252ULL;
  FrameLimits l{1 << 16, 1 << 24};
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    uint8_t buf[kFramePreambleBytes];
    for (auto& b : buf) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = static_cast<uint8_t>(x);
    }
    if (i % 2) std::memcpy(buf, "TSD2", 4);  // get past the magic half the time
    auto d = DecodePreamble(buf, l);
    if (!d.ok()) continue;
    ++accepted;
    EXPECT_LE(d->header_len, l.max_header);
    EXPECT_LE(d->payload_len, l.max_payload);
  }
  EXPECT_LT(accepted, 100);  // random garbage almost never passes
}

TEST(FrameTest, PayloadAlignKeepsTheHeaderOn64ByteBoundaries) {
  EXPECT_EQ(PayloadAlign(0), 0u);
  EXPECT_EQ(PayloadAlign(1), 64u);
  EXPECT_EQ(PayloadAlign(64), 64u);
  EXPECT_EQ(PayloadAlign(65), 128u);
}

}  // namespace
}  // namespace tessera
