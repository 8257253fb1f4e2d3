// The listen/advertise decision of every serving node, exhaustively over its inputs' kinds.
#include "common/addressing.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

AddressInputs Local() { return AddressInputs{{}, {}, {}, {}, {}, {"127.0.0.1:2379"}, {}}; }
AddressInputs Remote() { return AddressInputs{{}, {}, {}, {}, {}, {"10.1.0.1:2379"}, "10.1.0.7"}; }

TEST(AddressingTest, NothingGivenWithEtcdOnThisHostIsLoopback) {
  auto a = ResolveNodeAddress(Local());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->listen, "127.0.0.1");
  EXPECT_EQ(a->advertise, "127.0.0.1");
}

TEST(AddressingTest, NothingGivenWithEtcdElsewhereTakesTheRouteTowardEtcd) {
  auto a = ResolveNodeAddress(Remote());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->advertise, "10.1.0.7");
  EXPECT_EQ(a->listen, "10.1.0.7");
  EXPECT_NE(a->reason.find("10.1.0.1:2379"), std::string::npos) << a->reason;
}

TEST(AddressingTest, NothingGivenWithEtcdElsewhereAndNoRouteIsRefusedNamingTheFlag) {
  auto in = Remote();
  in.route_to_etcd.clear();
  auto a = ResolveNodeAddress(in);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--advertise"), std::string::npos) << a.status();
}

TEST(AddressingTest, PrecedenceOfTheAdvertisedAddress) {
  auto in = Remote();
  in.env_pod_ip = "10.1.0.5";
  EXPECT_EQ(ResolveNodeAddress(in)->advertise, "10.1.0.5");
  EXPECT_EQ(ResolveNodeAddress(in)->reason, "POD_IP");
  in.env_advertise = "10.1.0.4";
  EXPECT_EQ(ResolveNodeAddress(in)->advertise, "10.1.0.4");
  in.host = "10.1.0.3";
  EXPECT_EQ(ResolveNodeAddress(in)->advertise, "10.1.0.3");
  EXPECT_EQ(ResolveNodeAddress(in)->listen, "10.1.0.3");
  in.host.clear();
  in.advertise = "10.1.0.2";
  in.listen = "0.0.0.0";
  auto a = ResolveNodeAddress(in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->advertise, "10.1.0.2");
  EXPECT_EQ(a->listen, "0.0.0.0");
}

TEST(AddressingTest, ASpecificListenAddressIsAdvertised) {
  auto in = Remote();
  in.listen = "10.1.0.9";
  auto a = ResolveNodeAddress(in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->advertise, "10.1.0.9");
  EXPECT_EQ(a->listen, "10.1.0.9");
}

TEST(AddressingTest, AWildcardListenAddressIsNeverAdvertised) {
  auto in = Remote();
  in.listen = "0.0.0.0";
  auto a = ResolveNodeAddress(in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->advertise, "10.1.0.7");  // the route toward etcd, not the wildcard
  EXPECT_EQ(a->listen, "0.0.0.0");
  in = Local();
  in.listen = "0.0.0.0";
  EXPECT_EQ(ResolveNodeAddress(in)->advertise, "127.0.0.1");
}

TEST(AddressingTest, AdvertisingAWildcardIsRefused) {
  for (std::string w : {"0.0.0.0", "::", "[::]"}) {
    auto in = Local();
    in.advertise = w;
    auto a = ResolveNodeAddress(in);
    ASSERT_FALSE(a.ok()) << w;
    EXPECT_NE(a.status().message().find("wildcard"), std::string::npos) << a.status();
    in = Local();
    in.host = w;
    EXPECT_FALSE(ResolveNodeAddress(in).ok()) << w;
    in = Local();
    in.env_pod_ip = w;
    EXPECT_FALSE(ResolveNodeAddress(in).ok()) << w;
  }
}

TEST(AddressingTest, AdvertisingLoopbackWhileEtcdIsElsewhereIsRefused) {
  for (std::string lo : {"127.0.0.1", "127.0.1.1", "localhost", "::1"}) {
    auto in = Remote();
    in.host = lo;
    auto a = ResolveNodeAddress(in);
    ASSERT_FALSE(a.ok()) << lo;
    EXPECT_NE(a.status().message().find("loopback"), std::string::npos) << a.status();
    EXPECT_NE(a.status().message().find("10.1.0.1:2379"), std::string::npos) << a.status();
  }
  // With etcd on this host too, loopback is right.
  auto in = Local();
  in.host = "127.0.0.1";
  EXPECT_TRUE(ResolveNodeAddress(in).ok());
  // One remote member among several is enough to say peers are elsewhere.
  in.etcd_endpoints = {"127.0.0.1:2379", "etcd-1.etcd:2379"};
  EXPECT_FALSE(ResolveNodeAddress(in).ok());
}

TEST(AddressingTest, ListeningOnLoopbackWhileAdvertisingAnotherAddressIsRefused) {
  auto in = Remote();
  in.listen = "127.0.0.1";
  in.advertise = "10.1.0.7";
  auto a = ResolveNodeAddress(in);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("refused"), std::string::npos) << a.status();
}

TEST(AddressingTest, HostWithListenOrAdvertiseIsRefused) {
  auto in = Local();
  in.host = "127.0.0.1";
  in.listen = "127.0.0.1";
  EXPECT_FALSE(ResolveNodeAddress(in).ok());
  in.listen.clear();
  in.advertise = "127.0.0.1";
  EXPECT_FALSE(ResolveNodeAddress(in).ok());
}

TEST(AddressingTest, HostParts) {
  EXPECT_EQ(HostOf("10.0.0.1:7000"), "10.0.0.1");
  EXPECT_EQ(HostOf("[fe80::1]:7000"), "fe80::1");
  EXPECT_EQ(HostOf("fe80::1"), "fe80::1");
  EXPECT_EQ(HostOf("node-3"), "node-3");
  EXPECT_TRUE(IsWildcardHost(""));
  EXPECT_FALSE(IsWildcardHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1:2379"));
  EXPECT_TRUE(IsLoopbackHost("localhost:2379"));
}

TEST(AddressingTest, AdvertisedEndpointsKeepPortsAndSharedMemoryNames) {
  EXPECT_EQ(AdvertisedEndpoint("0.0.0.0:7000", "10.0.0.2"), "10.0.0.2:7000");
  EXPECT_EQ(AdvertisedEndpoint("10.0.0.2:7000", "10.0.0.2"), "10.0.0.2:7000");
  EXPECT_EQ(AdvertisedEndpoint("[::]:7000", "fe80::2"), "[fe80::2]:7000");
  EXPECT_EQ(AdvertisedEndpoint("@tessera-shm-1-ab", "10.0.0.2"), "@tessera-shm-1-ab");
  EXPECT_EQ(JoinHostPort("fe80::2", 80), "[fe80::2]:80");
  EXPECT_EQ(JoinHostPort("10.0.0.2", 80), "10.0.0.2:80");
}

}  // namespace
}  // namespace tessera
