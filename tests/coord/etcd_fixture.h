// Fixture for tests that need a real etcd: starts one per test on free loopback ports and ends
// it (by PID) with the test, whatever the outcome. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "coord/etcd_client.h"
#include "harness/etcd_server.h"
#include "harness/wait.h"

namespace tessera::testing {

class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = EtcdServer::Launch();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = NewClient();
  }

  std::unique_ptr<etcd::EtcdClient> NewClient(std::chrono::milliseconds retry = std::chrono::seconds(20)) {
    etcd::EtcdOptions o;
    o.endpoints = {server_->endpoint()};
    o.retry_timeout = retry;
    auto c = etcd::EtcdClient::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  std::unique_ptr<EtcdServer> server_;
  std::unique_ptr<etcd::EtcdClient> client_;
};

}  // namespace tessera::testing
