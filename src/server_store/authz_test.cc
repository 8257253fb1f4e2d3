// Unit tests of the authorization table and the credentials.
#include "server_store/authz.h"

#include <gtest/gtest.h>

#include <set>

#include "server_store/credentials.h"

namespace tessera::server {
namespace {

// Every role x action, written out: a change to the table must change this test.
TEST(AuthzTest, EveryRoleAndAction) {
  const std::set<Action> viewer = {Action::kReadNamespace, Action::kListJobs,     Action::kReadJob,
                                   Action::kReadLogs,      Action::kListDatasets, Action::kReadDataset,
                                   Action::kReadQuota};
  std::set<Action> member = viewer;
  member.insert({Action::kSubmitJob, Action::kStopJob, Action::kScaleJob, Action::kDeleteJob,
                 Action::kUploadDataset, Action::kDeleteDataset});
  std::set<Action> admin = member;
  admin.insert({Action::kShareDataset, Action::kManageMembers, Action::kReadAudit});
  for (Action a : AllActions()) {
    SCOPED_TRACE(ActionName(a));
    EXPECT_FALSE(Allowed(std::nullopt, false, a));
    EXPECT_EQ(Allowed(NamespaceRole::kViewer, false, a), viewer.count(a) == 1);
    EXPECT_EQ(Allowed(NamespaceRole::kMember, false, a), member.count(a) == 1);
    EXPECT_EQ(Allowed(NamespaceRole::kAdmin, false, a), admin.count(a) == 1);
    EXPECT_TRUE(Allowed(std::nullopt, true, a));  // a server administrator, anywhere
  }
  EXPECT_FALSE(Allowed(NamespaceRole::kAdmin, false, Action::kSetQuota));
  EXPECT_EQ(AllActions().size(), 17u);
}

TEST(AuthzTest, RoleNames) {
  for (auto r : {NamespaceRole::kViewer, NamespaceRole::kMember, NamespaceRole::kAdmin})
    EXPECT_EQ(*ParseNamespaceRole(NamespaceRoleName(r)), r);
  EXPECT_FALSE(ParseNamespaceRole("owner").ok());
}

TEST(CredentialsTest, PasswordsHashWithSaltAndVerify) {
  auto h1 = HashPassword("correct horse");
  auto h2 = HashPassword("correct horse");
  ASSERT_TRUE(h1.ok() && h2.ok());
  EXPECT_NE(*h1, *h2);  // salted
  EXPECT_EQ(h1->rfind("$argon2id$", 0), 0u) << *h1;
  EXPECT_TRUE(VerifyPassword(*h1, "correct horse"));
  EXPECT_FALSE(VerifyPassword(*h1, "correct horsE"));
  EXPECT_FALSE(VerifyPassword("", "correct horse"));
  EXPECT_FALSE(VerifyPassword("garbage", "correct horse"));
  EXPECT_FALSE(HashPassword("short").ok());
  EXPECT_FALSE(HashPassword(std::string(1025, 'x')).ok());
}

TEST(CredentialsTest, TokensAreRandomAndStoredAsDigests) {
  const std::string a = NewToken(), b = NewToken();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 4u + 64u);
  EXPECT_EQ(a.rfind("tsk_", 0), 0u);
  EXPECT_EQ(TokenDigest(a).size(), 64u);
  EXPECT_NE(TokenDigest(a), TokenDigest(b));
  EXPECT_EQ(TokenDigest(a).find(a.substr(4, 16)), std::string::npos);
}

}  // namespace
}  // namespace tessera::server
