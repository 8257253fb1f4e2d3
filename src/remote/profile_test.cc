// The command line's saved login: where it lives, server addresses, and the file itself (mode
// 0600, refused when it is not a login).
#include "remote/profile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/files.h"

namespace tessera::remote {
namespace {

TEST(Profile, ConfigDirFollowsTheEnvironment) {
  EXPECT_EQ(ConfigDir("/etc/t", "/x", "/home/ada"), "/etc/t");
  EXPECT_EQ(ConfigDir("", "/x", "/home/ada"), "/x/tessera");
  EXPECT_EQ(ConfigDir("", "", "/home/ada"), "/home/ada/.config/tessera");
}

TEST(Profile, ServerAddressesAreNormalized) {
  EXPECT_EQ(*NormalizeServer("127.0.0.1:8780"), "http://127.0.0.1:8780");
  EXPECT_EQ(*NormalizeServer("http://localhost:8780/"), "http://localhost:8780");
  EXPECT_EQ(*NormalizeServer("https://ml.example.com/api/v1"), "https://ml.example.com:443");
  EXPECT_EQ(*NormalizeServer("http://[::1]:9/api/v1/"), "http://[::1]:9");
  EXPECT_EQ(*NormalizeServer("example"), "http://example:80");
  for (const char* bad :
       {"", "ftp://h:1", "http://h:1/jobs", "http://h:99999", "h:1?x=1", "http://:80", "h p"}) {
    auto s = NormalizeServer(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("'" + std::string(bad) + "'"), std::string::npos) << s.status();
  }
}

TEST(Profile, LoginIsSavedForItsOwnerAloneAndReadBack) {
  auto dir = MakeTempDir("tessera-profile-");
  ASSERT_TRUE(dir.ok());
  const std::string cfg = *dir + "/nested/tessera";
  auto none = LoadLogin(cfg);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(SaveLogin(cfg, {"http://h:1", "ada", "secret", "t1"}).ok());
  struct stat st;
  ASSERT_EQ(::stat((cfg + "/login.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto got = LoadLogin(cfg);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->token, "secret");
  EXPECT_EQ((*got)->user, "ada");
  ASSERT_TRUE(WriteFileAtomic(cfg + "/login.json", "{\"server\": 3").ok());
  auto broken = LoadLogin(cfg);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("tessera login"), std::string::npos);
  ASSERT_TRUE(RemoveLogin(cfg).ok());
  ASSERT_TRUE(RemoveLogin(cfg).ok()) << "removing no login is not an error";
  EXPECT_FALSE(LoadLogin(cfg)->has_value());
  (void)RemoveAll(*dir);
}

}  // namespace
}  // namespace tessera::remote
