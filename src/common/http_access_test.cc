// Unit tests of HttpAccess: probes are open, everything else needs the token in one of its forms.
#include "common/http_access.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

using V = HttpAccess::Verdict;

TEST(HttpAccess, OpenWithoutATokenAndProbesAlwaysOpen) {
  HttpAccess open("");
  EXPECT_EQ(open.Decide("/api/status", "", "", ""), V::kAllow);
  HttpAccess guarded("s3cr3t-token");
  EXPECT_EQ(guarded.Decide("/healthz", "", "", ""), V::kAllow);
  EXPECT_EQ(guarded.Decide("/readyz", "", "", ""), V::kAllow);
  for (const char* path : {"/", "/metrics", "/api/status", "/api/logs", "/healthz/x", "/readyzz"}) {
    EXPECT_EQ(guarded.Decide(path, "", "", ""), V::kDeny) << path;
  }
}

TEST(HttpAccess, TheTokenInAHeaderACookieOrTheQuery) {
  HttpAccess g("s3cr3t-token");
  EXPECT_EQ(g.Decide("/metrics", "Bearer s3cr3t-token", "", ""), V::kAllow);
  EXPECT_EQ(g.Decide("/metrics", "Bearer s3cr3t-tokeN", "", ""), V::kDeny);
  EXPECT_EQ(g.Decide("/metrics", "Bearer s3cr3t-token ", "", ""), V::kDeny);
  EXPECT_EQ(g.Decide("/metrics", "Basic s3cr3t-token", "", ""), V::kDeny);
  EXPECT_EQ(g.Decide("/metrics", "bearer s3cr3t-token", "", ""), V::kDeny);
  EXPECT_EQ(g.Decide("/api/status", "", "tessera_token=s3cr3t-token", ""), V::kAllow);
  EXPECT_EQ(g.Decide("/api/status", "", "a=1; tessera_token=s3cr3t-token; b=2", ""), V::kAllow);
  EXPECT_EQ(g.Decide("/api/status", "", "a=1; tessera_token=wrong; b=2", ""), V::kDeny);
  EXPECT_EQ(g.Decide("/api/status", "", "xtessera_token=s3cr3t-token", ""), V::kDeny);
  EXPECT_EQ(g.Decide("/", "", "", "s3cr3t-token"), V::kAllowAndSetCookie);
  EXPECT_EQ(g.Decide("/", "", "", "s3cr3t"), V::kDeny);
}

TEST(HttpAccess, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"}) EXPECT_TRUE(IsLoopbackHost(h)) << h;
  for (const char* h : {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "example.com", ""}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

}  // namespace
}  // namespace tessera
