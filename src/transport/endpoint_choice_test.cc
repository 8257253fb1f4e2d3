// Endpoint choice: every combination of what a pserver offers, where it runs and what a
// trainer asks for.
#include "transport/endpoint_choice.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

using K = TransportKind;

PserverEndpoints Offer(bool grpc, bool tcp, bool shm, const std::string& host) {
  PserverEndpoints e;
  if (grpc) e.endpoints[K::kGrpc] = "h:1";
  if (tcp) e.endpoints[K::kTcp] = "h:2";
  if (shm) e.endpoints[K::kShm] = "@s";
  e.host_id = host;
  return e;
}

TEST(EndpointChoiceTest, AutoPrefersSharedMemoryOnTheSameHostThenTcpThenGrpc) {
  for (int mask = 1; mask < 8; ++mask) {
    bool grpc = mask & 1, tcp = mask & 2, shm = mask & 4;
    for (bool same : {true, false}) {
      auto offered = Offer(grpc, tcp, shm, "A");
      auto c = ChooseEndpoint(offered, K::kAuto, same ? "A" : "B");
      K want = (shm && same) ? K::kShm : tcp ? K::kTcp : K::kGrpc;
      if (!grpc && !tcp && !(shm && same)) {
        EXPECT_FALSE(c.ok()) << mask << same;
        EXPECT_NE(c.status().message().find("offers shm"), std::string::npos) << c.status();
        continue;
      }
      ASSERT_TRUE(c.ok()) << mask << same << c.status();
      EXPECT_EQ(c->kind, want) << mask << same;
      EXPECT_EQ(c->endpoint, offered.endpoints.at(want));
    }
  }
}

TEST(EndpointChoiceTest, AnExplicitTransportIsUsedOrRefusedSayingWhatIsOffered) {
  for (int mask = 0; mask < 8; ++mask) {
    bool grpc = mask & 1, tcp = mask & 2, shm = mask & 4;
    for (bool same : {true, false}) {
      auto offered = Offer(grpc, tcp, shm, "A");
      for (K k : {K::kGrpc, K::kTcp, K::kShm}) {
        bool has = (k == K::kGrpc && grpc) || (k == K::kTcp && tcp) || (k == K::kShm && shm);
        auto c = ChooseEndpoint(offered, k, same ? "A" : "B");
        if (has && (k != K::kShm || same)) {
          ASSERT_TRUE(c.ok()) << c.status();
          EXPECT_EQ(c->kind, k);
        } else {
          ASSERT_FALSE(c.ok());
          EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
          EXPECT_NE(c.status().message().find(has ? "another host" : "the pserver offers"), std::string::npos)
              << c.status();
        }
      }
    }
  }
}

TEST(EndpointChoiceTest, UnknownHostsAreNeverTheSameHost) {
  auto c = ChooseEndpoint(Offer(false, true, true, ""), K::kAuto, "");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, K::kTcp);
}

TEST(EndpointChoiceTest, AnExcludedTransportIsSkipped) {
  auto c = ChooseEndpoint(Offer(true, true, true, "A"), K::kAuto, "A", K::kShm);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, K::kTcp);
}

TEST(EndpointChoiceTest, RegistrationsAreParsedOldAndNew) {
  auto e = ParsePserverEndpoints(
      R"({"address":"h:2","endpoints":{"tcp":"h:2","shm":"@x","grpc":"h:1","future":"?"},"host_id":"A"})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->endpoints.at(K::kShm), "@x");
  EXPECT_EQ(e->endpoints.size(), 3u);
  EXPECT_EQ(e->host_id, "A");
  auto old = ParsePserverEndpoints(R"({"address":"h:9","transport":"grpc"})");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->endpoints.at(K::kGrpc), "h:9");
  EXPECT_FALSE(ParsePserverEndpoints("not json").ok());
  EXPECT_FALSE(ParsePserverEndpoints(R"({"endpoints":{}})").ok());
}

TEST(EndpointChoiceTest, KindsParseAndPrint) {
  for (K k : {K::kGrpc, K::kTcp, K::kShm, K::kAuto}) {
    auto p = ParseTransportKind(TransportKindName(k));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, k);
  }
  auto bad = ParseTransportKind("udp");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("grpc, tcp, shm or auto"), std::string::npos);
}

TEST(EndpointChoiceTest, HostIdentityNamesBootAndNetworkNamespace) {
  std::string id = HostIdentity();
  EXPECT_NE(id.find("net:["), std::string::npos) << id;
  EXPECT_EQ(id, HostIdentity());
}

}  // namespace
}  // namespace tessera
