// Unit tests of the frame MAC: a tag checks only with the same key, nonce, preamble and header.
#include "security/frame_mac.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tessera::security {
namespace {

TEST(FrameMac, TagChecksOnlyForTheSameKeyNonceAndBytes) {
  const Key key = JobSecret::Generate().Derive("frames");
  const Key other_key = JobSecret::Generate().Derive("frames");
  const Nonce nonce = NewNonce(), other_nonce = NewNonce();
  ASSERT_NE(std::memcmp(nonce.data(), other_nonce.data(), nonce.size()), 0);
  uint8_t pre[32];
  for (int i = 0; i < 32; ++i) pre[i] = static_cast<uint8_t>(i * 7);
  const std::string header = "a request header";
  uint8_t tag[kFrameTagBytes];
  FrameMac sender(key, nonce);
  sender.Tag(pre, sizeof pre, header, tag);

  FrameMac receiver(key, nonce);
  EXPECT_TRUE(receiver.Check(pre, sizeof pre, header, tag));
  EXPECT_TRUE(receiver.Check(pre, sizeof pre, header, tag));  // reusable

  FrameMac wrong_key(other_key, nonce);
  EXPECT_FALSE(wrong_key.Check(pre, sizeof pre, header, tag));
  FrameMac wrong_nonce(key, other_nonce);  // replayed on another connection
  EXPECT_FALSE(wrong_nonce.Check(pre, sizeof pre, header, tag));
  for (int i = 0; i < 32; ++i) {
    uint8_t changed[32];
    std::memcpy(changed, pre, 32);
    changed[i] ^= 1;
    EXPECT_FALSE(receiver.Check(changed, sizeof changed, header, tag)) << "preamble byte " << i;
  }
  EXPECT_FALSE(receiver.Check(pre, sizeof pre, "a request headeR", tag));
  EXPECT_FALSE(receiver.Check(pre, sizeof pre, header + "x", tag));
  uint8_t bad[kFrameTagBytes];
  std::memcpy(bad, tag, sizeof bad);
  bad[kFrameTagBytes - 1] ^= 0x80;
  EXPECT_FALSE(receiver.Check(pre, sizeof pre, header, bad));
  uint8_t zero[kFrameTagBytes] = {};
  EXPECT_FALSE(receiver.Check(pre, sizeof pre, header, zero));
}

}  // namespace
}  // namespace tessera::security
