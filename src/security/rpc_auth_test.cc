// Unit tests of RPC tokens: bound to the secret, the method, the body and a time window.
#include "security/rpc_auth.h"

#include <gtest/gtest.h>

namespace tessera::security {
namespace {

TEST(RpcAuth, TokenChecksForItsSecretMethodBodyAndTime) {
  const JobSecret secret = JobSecret::Generate();
  const RpcAuth auth(secret), other(JobSecret::Generate());
  const int64_t now = 1'800'000'000'000;
  const std::string token = auth.Token("GetTask", "body", now);
  EXPECT_TRUE(auth.Check(token, "GetTask", "body", now).ok());
  EXPECT_TRUE(RpcAuth(secret).Check(token, "GetTask", "body", now + 1000).ok());
  EXPECT_TRUE(auth.Check(token, "GetTask", "body", now + RpcAuth::kWindowMs).ok());
  EXPECT_TRUE(auth.Check(token, "GetTask", "body", now - RpcAuth::kWindowMs).ok());

  auto expect_denied = [](const Status& s, const std::string& words) {
    EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s;
    EXPECT_NE(s.message().find(words), std::string::npos) << s;
  };
  expect_denied(other.Check(token, "GetTask", "body", now), "do not match this job's secret");
  expect_denied(auth.Check(token, "FinishTask", "body", now), "do not match");
  expect_denied(auth.Check(token, "GetTask", "bodY", now), "do not match");
  expect_denied(auth.Check(token, "GetTask", "body", now + RpcAuth::kWindowMs + 1), "clocks");
  expect_denied(auth.Check(token, "GetTask", "body", now - RpcAuth::kWindowMs - 1), "clocks");
  expect_denied(auth.Check("", "GetTask", "body", now), "no job credentials");
  for (std::string bad :
       {"x", ".", "123.", ".0123456789abcdef0123456789abcdef", "12a.0123456789abcdef0123456789abcdef",
        "123.0123456789abcdef0123456789abcde", "99999999999999999999.0123456789abcdef0123456789abcdef"}) {
    expect_denied(auth.Check(bad, "GetTask", "body", now), "malformed");
  }
  // The refusal never echoes the token.
  Status s = other.Check(token, "GetTask", "body", now);
  EXPECT_EQ(s.message().find(token.substr(token.find('.') + 1)), std::string::npos);
}

}  // namespace
}  // namespace tessera::security
