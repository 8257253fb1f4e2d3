#include "common/digest.h"

#include <gtest/gtest.h>

#include "common/files.h"

namespace tessera {
namespace {

TEST(DigestTest, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(DigestTest, IncrementalEqualsWhole) {
  Sha256 h;
  h.Update("a");
  h.Update("bc");
  EXPECT_EQ(h.HexDigest(), Sha256Hex("abc"));
}

TEST(DigestTest, FileDigestAndMissingFile) {
  auto dir = MakeTempDir("digest-test-");
  ASSERT_TRUE(dir.ok());
  std::string path = *dir + "/f";
  std::string big(3 << 20, 'x');
  ASSERT_TRUE(WriteFileAtomic(path, big).ok());
  auto d = Sha256File(path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, Sha256Hex(big));
  auto missing = Sha256File(*dir + "/nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  ASSERT_TRUE(RemoveAll(*dir).ok());
}

}  // namespace
}  // namespace tessera
