// EtcdClient against a real etcd: KV, transactions (nested too), leases, failover, reconnect,
// auth, clear errors, and connections shared among clients only when asked.
#include "coord/etcd_client.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "coord/connection_sharing.h"
#include "coord/etcd_fixture.h"
#include "harness/ports.h"

namespace tessera::testing {
namespace {

using etcd::Compare;
using etcd::Op;
using etcd::Txn;

TEST_F(EtcdTest, PutGetDeleteWithRevisionsAndPrefixes) {
  auto r1 = client_->Put("/t/a", "1");
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(client_->Put("/t/b", "2").ok());
  ASSERT_TRUE(client_->Put("/tx", "outside").ok());
  auto r3 = client_->Put("/t/a", "3");
  ASSERT_TRUE(r3.ok());

  auto one = client_->Get("/t/a");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->kvs.size(), 1u);
  EXPECT_EQ(one->kvs[0].value, "3");
  EXPECT_EQ(one->kvs[0].create_revision, *r1);
  EXPECT_EQ(one->kvs[0].mod_revision, *r3);
  EXPECT_EQ(one->kvs[0].version, 2);

  etcd::GetOptions prefix;
  prefix.prefix = true;
  auto all = client_->Get("/t/", prefix);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->kvs.size(), 2u);  // not "/tx"
  EXPECT_EQ(all->kvs[0].key, "/t/a");

  etcd::GetOptions at;
  at.revision = *r1;
  auto old = client_->Get("/t/a", at);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->kvs[0].value, "1");

  etcd::GetOptions count;
  count.prefix = true;
  count.count_only = true;
  EXPECT_EQ(client_->Get("/t/", count)->count, 2);

  auto deleted = client_->Delete("/t/", true);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 2);
  EXPECT_TRUE(client_->Get("/t/", prefix)->kvs.empty());
}

TEST_F(EtcdTest, TxnComparesOnVersionCreateModAndValue) {
  auto rev = client_->Put("/k", "v1");
  ASSERT_TRUE(rev.ok());
  Txn t;
  t.compares = {Compare::Version("/k", Compare::Result::kEqual, 1),
                Compare::CreateRevision("/k", Compare::Result::kEqual, *rev),
                Compare::ModRevision("/k", Compare::Result::kEqual, *rev),
                Compare::Value("/k", Compare::Result::kEqual, "v1")};
  t.success = {Op::Put("/k", "v2"), Op::Get("/k")};
  t.failure = {Op::Get("/k")};
  auto ok = client_->Commit(t);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->succeeded);
  ASSERT_EQ(ok->results.size(), 2u);
  EXPECT_EQ(ok->results[1].range.kvs[0].value, "v2");
  // Same compares again: the value changed, so the failure branch runs.
  auto again = client_->Commit(t);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->succeeded);
  EXPECT_EQ(again->results[0].range.kvs[0].value, "v2");
}

TEST_F(EtcdTest, NestedTxnRunsTheInnerBranch) {
  Txn inner;
  inner.compares = {Compare::Absent("/n/1")};
  inner.success = {Op::Put("/n/1", "x")};
  Txn outer;
  outer.compares = {Compare::Absent("/n/0")};
  outer.success = {Op::Put("/n/0", "x")};
  outer.failure = {Op::Nested(inner)};
  auto first = client_->Commit(outer);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded);
  auto second = client_->Commit(outer);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->succeeded);
  ASSERT_TRUE(second->results[0].txn);
  EXPECT_TRUE(second->results[0].txn->succeeded);
  EXPECT_EQ(client_->Get("/n/1")->kvs.size(), 1u);
}

TEST_F(EtcdTest, LeaseGrantTimeToLiveRevoke) {
  auto lease = client_->GrantLease(5);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->ttl_seconds, 5);
  ASSERT_TRUE(client_->Put("/l/a", "x", lease->id).ok());
  auto info = client_->LeaseTimeToLive(lease->id, true);
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->ttl_seconds, 0);
  EXPECT_EQ(info->granted_ttl_seconds, 5);
  ASSERT_EQ(info->keys.size(), 1u);
  EXPECT_EQ(info->keys[0], "/l/a");
  ASSERT_TRUE(client_->RevokeLease(lease->id).ok());
  EXPECT_TRUE(client_->Get("/l/a")->kvs.empty());
  EXPECT_EQ(client_->LeaseTimeToLive(lease->id)->ttl_seconds, -1);
  // A put with a lease that does not exist is a clear error, not a retry loop.
  auto bad = client_->Put("/l/b", "x", lease->id);
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("lease"), std::string::npos);
  EXPECT_EQ(client_->GrantLease(0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EtcdTest, FailsOverToTheNextEndpoint) {
  etcd::EtcdOptions o;
  o.endpoints = {"127.0.0.1:" + std::to_string(FreePort()), server_->endpoint()};
  auto c = etcd::EtcdClient::Create(o);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 5; ++i) {
    auto r = (*c)->Put("/f", std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ((*c)->Get("/f")->kvs[0].value, "4");
}

TEST_F(EtcdTest, UnreachableEtcdGivesOneClearErrorNamingTheEndpoint) {
  etcd::EtcdOptions o;
  std::string dead = "127.0.0.1:" + std::to_string(FreePort());
  o.endpoints = {dead};
  o.retry_timeout = std::chrono::milliseconds(800);
  auto c = etcd::EtcdClient::Create(o);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Get("/x");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find(dead), std::string::npos) << r.status();
  EXPECT_EQ(etcd::EtcdClient::Create({}).status().code(), StatusCode::kInvalidArgument);
  etcd::EtcdOptions bad;
  bad.endpoints = {"nohostport"};
  EXPECT_EQ(etcd::EtcdClient::Create(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EtcdTest, ReconnectsAfterEtcdIsStoppedAndStarted) {
  ASSERT_TRUE(client_->Put("/r", "before").ok());
  ASSERT_TRUE(server_->Stop().ok());
  // A call made while etcd is down keeps retrying and succeeds once it is back.
  std::thread restarter([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // the outage being tested
    EXPECT_TRUE(server_->Start().ok());
  });
  auto r = client_->Put("/r", "during");
  restarter.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(client_->Get("/r")->kvs[0].value, "during");
}

TEST_F(EtcdTest, ShutdownCancelsRetryingCalls) {
  ASSERT_TRUE(server_->Stop().ok());
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    client_->Shutdown();
  });
  auto start = std::chrono::steady_clock::now();
  auto r = client_->Get("/x");
  stopper.join();
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_LT(SecondsSince(start), 10.0);
}

// Runs etcdctl (Debian etcd-client) against the test server.
int Etcdctl(const std::string& endpoint, const std::string& args) {
  std::string cmd =
      "ETCDCTL_API=3 /usr/bin/etcdctl --endpoints=" + endpoint + " " + args + " >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

TEST_F(EtcdTest, AuthenticatesWithUserAndPassword) {
  ASSERT_EQ(Etcdctl(server_->endpoint(), "user add root --new-user-password=s3cret --interactive=false"), 0);
  ASSERT_EQ(Etcdctl(server_->endpoint(), "auth enable"), 0);
  etcd::EtcdOptions o;
  o.endpoints = {server_->endpoint()};
  o.username = "root";
  o.password = "s3cret";
  auto authed = etcd::EtcdClient::Create(o);
  ASSERT_TRUE(authed.ok());
  auto put = (*authed)->Put("/secure", "yes");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*authed)->Get("/secure")->kvs[0].value, "yes");

  auto anonymous = NewClient(std::chrono::seconds(2));
  auto denied = anonymous->Get("/secure");
  EXPECT_FALSE(denied.ok());
  EXPECT_NE(denied.status().code(), StatusCode::kUnavailable) << denied.status();

  o.password = "wrong";
  auto wrong = etcd::EtcdClient::Create(o);
  auto r = (*wrong)->Get("/secure");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("authenticate"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// Each client connects on its own, unless a simulation asks clients to share (scale_sim): then
// every `k` of them share one connection, each still with its own calls.
TEST_F(EtcdTest, ClientsShareConnectionsOnlyWhenAsked) {
  const int port = std::stoi(server_->endpoint().substr(server_->endpoint().rfind(':') + 1));
  auto connections_with = [&](int sharing) {
    ShareConnectionsAmong(sharing);
    std::vector<std::unique_ptr<etcd::EtcdClient>> clients;
    for (int i = 0; i < 4; ++i) {
      clients.push_back(NewClient());
      EXPECT_TRUE(clients.back()->Put("/share/" + std::to_string(i), "x").ok());
    }
    ShareConnectionsAmong(1);
    const int before = ConnectionsTo(port);  // the fixture's own client's too
    clients.clear();
    int closed = 0;
    // The closed connections leave the table within seconds.
    WaitUntil([&] { return (closed = before - ConnectionsTo(port)) >= 4 / sharing; },
              std::chrono::seconds(10));
    return closed;
  };
  EXPECT_EQ(connections_with(1), 4);
  EXPECT_EQ(connections_with(2), 2);
  EXPECT_EQ(connections_with(4), 1);
}

TEST(EtcdTlsTest, TalksToEtcdOverTlsWithTheGivenCa) {
  EtcdServerOptions so;
  so.tls = true;
  auto server = EtcdServer::Launch(so);
  ASSERT_TRUE(server.ok()) << server.status();
  etcd::EtcdOptions o;
  o.endpoints = {(*server)->endpoint()};
  o.tls = true;
  o.ca_file = (*server)->ca_file();
  auto c = etcd::EtcdClient::Create(o);
  ASSERT_TRUE(c.ok());
  auto put = (*c)->Put("/tls", "yes");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*c)->Get("/tls")->kvs[0].value, "yes");

  // Without TLS the same server is unreachable; a missing CA file is a clear error.
  etcd::EtcdOptions plain;
  plain.endpoints = o.endpoints;
  plain.retry_timeout = std::chrono::milliseconds(1500);
  auto p = etcd::EtcdClient::Create(plain);
  EXPECT_FALSE((*p)->Get("/tls").ok());
  o.ca_file = (*server)->dir() + "/missing.pem";
  auto missing = etcd::EtcdClient::Create(o);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.pem"), std::string::npos);
}

}  // namespace
}  // namespace tessera::testing
