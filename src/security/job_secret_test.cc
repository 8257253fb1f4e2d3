// Unit tests of job secrets and HMAC-SHA256: known answers, text and file forms, refusals.
#include "security/job_secret.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "common/files.h"
#include "security/hmac.h"

namespace tessera::security {
namespace {

std::string Hex(const Key& k) {
  static const char d[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : k) s += {d[b >> 4], d[b & 15]};
  return s;
}

TEST(Hmac, KnownAnswerAndReuse) {
  Key key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i);
  // Python: hmac.new(bytes(range(32)), b'what do ya want for nothing?', sha256).hexdigest()
  const std::string expected = "099805f4ac310786968565c098db515cc50862b420ae31e20238312344bed36a";
  EXPECT_EQ(Hex(HmacOnce(key, "what do ya want for nothing?")), expected);
  // One context, two messages: the second is not polluted by the first.
  Hmac h(key);
  Key a, b;
  h.Begin();
  h.Update("something else");
  h.Finish(a.data());
  h.Begin();
  h.Update("what do ya ");
  h.Update("want for nothing?");
  h.Finish(b.data());
  EXPECT_EQ(Hex(b), expected);
  EXPECT_NE(Hex(a), expected);
}

TEST(JobSecret, GeneratedSecretsDifferAndRoundTrip) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    JobSecret s = JobSecret::Generate();
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s.Text().size(), 64u);
    EXPECT_TRUE(seen.insert(s.Text()).second);
    auto back = JobSecret::FromText("  " + s.Text() + "\n");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == s);
    EXPECT_EQ(back->Fingerprint(), s.Fingerprint());
  }
  EXPECT_TRUE(JobSecret().empty());
  EXPECT_EQ(JobSecret().Text(), "");
}

TEST(JobSecret, DerivedKeysDifferByPurposeAndSecret) {
  JobSecret a = JobSecret::Generate(), b = JobSecret::Generate();
  EXPECT_NE(Hex(a.Derive("frames")), Hex(a.Derive("rpc")));
  EXPECT_NE(Hex(a.Derive("frames")), Hex(b.Derive("frames")));
  EXPECT_EQ(Hex(a.Derive("frames")), Hex(a.Derive("frames")));
  EXPECT_NE(a.Fingerprint(), b.Fingerprint());
  EXPECT_EQ(a.Fingerprint().size(), 8u);
  // The fingerprint and the derived keys do not show the secret.
  EXPECT_EQ(a.Text().find(a.Fingerprint()), std::string::npos);
}

TEST(JobSecret, BadTextIsRefusedWithoutEchoingIt) {
  auto short_text = JobSecret::FromText("abc123");
  EXPECT_EQ(short_text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_text.status().message().find("64 hex characters"), std::string::npos);
  std::string bad(64, 'g');
  auto not_hex = JobSecret::FromText(bad);
  EXPECT_EQ(not_hex.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(not_hex.status().message().find(bad), std::string::npos);
}

TEST(JobSecret, FileIsWrittenPrivateAndRefusedWhenOthersMayReadIt) {
  auto dir = MakeTempDir("secret-test-");
  ASSERT_TRUE(dir.ok());
  const std::string path = *dir + "/job.secret";
  JobSecret s = JobSecret::Generate();
  ASSERT_TRUE(WriteSecretFile(path, s).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = JobSecret::FromFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == s);

  ::chmod(path.c_str(), 0644);
  auto open = JobSecret::FromFile(path);
  EXPECT_EQ(open.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos);

  auto missing = JobSecret::FromFile(*dir + "/none");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(WriteFileAtomic(path, "not a secret\n", 0600).ok());
  auto garbage = JobSecret::FromFile(path);
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find(path), std::string::npos);
  EXPECT_TRUE(RemoveAll(*dir).ok());
}

}  // namespace
}  // namespace tessera::security
