// Unit tests of the job CA and node certificates: names, signatures, refusals.
#include "security/certs.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tessera::security {
namespace {

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(Certs, NodeCertificatesNameTheJobAndChainToItsCaOnly) {
  auto ca = MakeJobCa("mnist", 30);
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_NE(ca->cert.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(ca->key.find("PRIVATE KEY"), std::string::npos);
  auto node = MakeNodeCert(*ca, "mnist", "pserver-0", {"10.0.0.7", "ps0.example.com", "::1"}, 30);
  ASSERT_TRUE(node.ok()) << node.status();
  auto names = CertNames(node->cert);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_TRUE(Has(*names, "DNS:tessera.mnist"));
  EXPECT_TRUE(Has(*names, "DNS:pserver-0"));
  EXPECT_TRUE(Has(*names, "IP:10.0.0.7"));
  EXPECT_TRUE(Has(*names, "IP:::1"));
  EXPECT_TRUE(Has(*names, "DNS:ps0.example.com"));
  EXPECT_TRUE(*SignedBy(node->cert, ca->cert));
  auto other_ca = MakeJobCa("other", 30);
  ASSERT_TRUE(other_ca.ok());
  EXPECT_FALSE(*SignedBy(node->cert, other_ca->cert)) << "another job's CA does not vouch for it";
  EXPECT_NE(node->key, ca->key);
}

TEST(Certs, BadInputIsRefusedSayingWhat) {
  auto ca = MakeJobCa("j", 30);
  ASSERT_TRUE(ca.ok());
  auto bad_host = MakeNodeCert(*ca, "j", "n", {"not a host!"}, 30);
  EXPECT_EQ(bad_host.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_host.status().message().find("neither an IP address nor a host name"), std::string::npos);
  auto other = MakeJobCa("k", 30);
  Pem mixed{ca->cert, other->key};
  auto wrong_key = MakeNodeCert(mixed, "j", "n", {}, 30);
  EXPECT_NE(wrong_key.status().message().find("does not belong"), std::string::npos) << wrong_key.status();
  auto garbage = MakeNodeCert(Pem{"nope", ca->key}, "j", "n", {}, 30);
  EXPECT_NE(garbage.status().message().find("not a PEM certificate"), std::string::npos);
  EXPECT_EQ(MakeJobCa("j", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeJobCa("j", 100000).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::security
