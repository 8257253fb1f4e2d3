// A trainer's probe endpoints: alive at once, ready only once told so (after joining the job).
#include "api/health_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

namespace tessera::api {
namespace {

TEST(HealthServerTest, AliveAtOnceReadyOnceJoined) {
  auto h = HealthServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(h.ok()) << h.status();
  httplib::Client c("127.0.0.1", (*h)->port());
  auto alive = c.Get("/healthz");
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->status, 200);
  auto before = c.Get("/readyz");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 503);
  EXPECT_NE(before->body.find("joining"), std::string::npos) << before->body;
  (*h)->SetReady(true);
  auto after = c.Get("/readyz");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

TEST(HealthServerTest, StoppedRightAfterStartingDoesNotHang) {
  // Destroyed before its thread entered the listening loop: stop() must not be lost.
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(HealthServer::Start("127.0.0.1", 0).ok());
}

}  // namespace
}  // namespace tessera::api
