// Accounts on both database backends: sign-up (with its namespace), login, sessions and API
// tokens (use, expiry, revocation, another user's token), approval, roles, the audit log.
#include "server_store/accounts.h"

#include <gtest/gtest.h>

#include "server/db_fixture.h"
#include "server_store/schema.h"

namespace tessera::server {
namespace {

class AccountsTest : public DatabaseTest {
 protected:
  void SetUp() override {
    DatabaseTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(Migrate(*db_, ServerSchema()).ok());
  }
};

constexpr int64_t kT0 = 1'800'000'000'000;

TEST_P(AccountsTest, SignUpLoginAndTokens) {
  Accounts acc(db_.get(), {});
  auto ada = acc.SignUp("ada", "correct horse", kT0);
  ASSERT_TRUE(ada.ok()) << ada.status();
  EXPECT_TRUE(ada->admin);  // the first user runs the server
  auto bob = acc.SignUp("bob", "battery staple", kT0);
  ASSERT_TRUE(bob.ok());
  EXPECT_FALSE(bob->admin);
  EXPECT_EQ(acc.SignUp("bob", "another password", kT0).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(acc.SignUp("Bob", "battery staple", kT0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(acc.SignUp("../x", "battery staple", kT0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(acc.SignUp("carl", "short", kT0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*acc.RoleIn(bob->id, "bob"), NamespaceRole::kAdmin);
  EXPECT_EQ(*acc.RoleIn(bob->id, "ada"), std::nullopt);

  // Wrong name and wrong password fail alike.
  auto wrong_pw = acc.Login("bob", "battery stapler", kT0);
  auto wrong_name = acc.Login("bobby", "battery staple", kT0);
  EXPECT_EQ(wrong_pw.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong_pw.status().message(), wrong_name.status().message());

  auto session = acc.Login("bob", "battery staple", kT0);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(session->kind, "session");
  EXPECT_EQ(acc.Authenticate(session->token, kT0 + 1000)->name, "bob");
  // Sessions expire; API tokens do not, until revoked.
  EXPECT_EQ(acc.Authenticate(session->token, kT0 + 8LL * 24 * 3600 * 1000).status().code(),
            StatusCode::kUnauthenticated);
  auto api = acc.CreateApiToken(bob->id, "laptop", kT0);
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(acc.Authenticate(api->token, kT0 + 365LL * 24 * 3600 * 1000)->id, bob->id);
  // Only digests are stored.
  auto stored = db_->Query("SELECT digest FROM tokens");
  ASSERT_TRUE(stored.ok());
  for (const auto& r : *stored) EXPECT_NE(r.Text(0), api->token);
  // Another user cannot revoke bob's token; bob can, once.
  EXPECT_EQ(acc.RevokeToken(ada->id, api->id, kT0).code(), StatusCode::kNotFound);
  EXPECT_TRUE(acc.RevokeToken(bob->id, api->id, kT0).ok());
  EXPECT_EQ(acc.RevokeToken(bob->id, api->id, kT0).code(), StatusCode::kNotFound);
  auto revoked = acc.Authenticate(api->token, kT0 + 1);
  EXPECT_EQ(revoked.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(revoked.status().message().find("revoked"), std::string::npos);
  EXPECT_EQ(acc.Authenticate("tsk_" + std::string(64, '0'), kT0).status().code(),
            StatusCode::kUnauthenticated);
  auto listed = acc.ListTokens(bob->id);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  for (const auto& t : *listed) EXPECT_EQ(t.revoked_ms.has_value(), t.id == api->id) << t.id;
}

TEST_P(AccountsTest, ApprovalRolesAndAudit) {
  Accounts acc(db_.get(), {.require_approval = true});
  auto root = acc.SignUp("root", "correct horse", kT0);
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root->approved);  // the first user needs nobody's approval
  auto eve = acc.SignUp("eve", "battery staple", kT0);
  ASSERT_TRUE(eve.ok());
  EXPECT_FALSE(eve->approved);
  EXPECT_EQ(acc.Login("eve", "battery staple", kT0).status().code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(acc.Approve("eve").ok());
  EXPECT_TRUE(acc.Login("eve", "battery staple", kT0).ok());
  EXPECT_EQ(acc.Approve("nobody").code(), StatusCode::kNotFound);

  ASSERT_TRUE(acc.SetRole("root", "eve", NamespaceRole::kViewer).ok());
  EXPECT_EQ(*acc.RoleIn(eve->id, "root"), NamespaceRole::kViewer);
  ASSERT_TRUE(acc.SetRole("root", "eve", NamespaceRole::kMember).ok());
  EXPECT_EQ(*acc.RoleIn(eve->id, "root"), NamespaceRole::kMember);
  ASSERT_TRUE(acc.SetRole("root", "eve", std::nullopt).ok());
  EXPECT_EQ(*acc.RoleIn(eve->id, "root"), std::nullopt);
  EXPECT_EQ(acc.SetRole("nope", "eve", NamespaceRole::kViewer).code(), StatusCode::kNotFound);

  ASSERT_TRUE(acc.Audit(root->id, "approve", "user eve", "ok", "", kT0).ok());
  ASSERT_TRUE(acc.Audit("", "login", "user mallory", "denied", "unknown user", kT0 + 1).ok());
  auto audit = db_->Query("SELECT user_id, action, outcome FROM audit ORDER BY time_ms");
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].Text(0), root->id);
  EXPECT_TRUE((*audit)[1].IsNull(0));
}

INSTANTIATE_TEST_SUITE_P(Backends, AccountsTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
