// TrainerMembership against a real etcd: a join whose lease is gone before it registers (a join
// that outlasts its TTL, as in a storm of a thousand trainers on an overloaded etcd) takes a new
// lease and registers, instead of failing with "requested lease not found".
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "client/trainer_membership.h"
#include "coord/etcd_fixture.h"
#include "coord/keys.h"
#include "coord/registry.h"

namespace tessera::testing {
namespace {

TEST_F(EtcdTest, AJoinWhoseLeaseWasGoneBeforeItRegisteredTakesANewOne) {
  const std::string job = "j";
  // A predecessor with the same id, whose process is gone: its lease runs out in 3 s. The join
  // waits for it, which gives this test the time to revoke the join's own lease meanwhile.
  auto old = client_->GrantLease(3);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(Registry(client_.get(), keys::TrainerPrefix(job)).Register("5", "{}", old->id).ok());
  auto before = client_->ListLeases();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->size(), 1u);

  TrainerMembership::Options o;
  o.job = job;
  o.trainer_id = "5";
  o.lease_ttl_seconds = 10;
  StatusOr<std::unique_ptr<TrainerMembership>> joined = Status::Unknown("not joined");
  std::thread join([&] { joined = TrainerMembership::Join(client_.get(), o, ClientLimits{}); });
  // The join's lease, once granted: revoked, as etcd drops a lease it did not hear from in time.
  int64_t revoked = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto now = client_->ListLeases();
        if (!now.ok()) return false;
        for (int64_t id : *now)
          if (id != old->id) revoked = id;
        return revoked != 0;
      },
      std::chrono::seconds(10)));
  ASSERT_TRUE(client_->RevokeLease(revoked).ok());
  join.join();
  ASSERT_TRUE(joined.ok()) << joined.status();
  const TrainerMembership& m = **joined;
  EXPECT_EQ(m.id(), "5");
  EXPECT_NE(m.lease(), revoked) << "a new lease";
  EXPECT_FALSE(m.lost());
  auto kv = client_->Get(keys::Trainer(job, "5"));
  ASSERT_TRUE(kv.ok()) << kv.status();
  ASSERT_EQ(kv->kvs.size(), 1u);
  EXPECT_EQ(kv->kvs[0].lease, m.lease()) << "registered under the new lease";
}

}  // namespace
}  // namespace tessera::testing
