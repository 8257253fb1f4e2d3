// Watcher against a real etcd: every put and delete in order, exactly once, across an etcd
// restart; progress notifications; compaction ends the watch with a clear status.
#include <gtest/gtest.h>

#include <mutex>

#include "coord/etcd_fixture.h"
#include "coord/etcd_watch.h"

namespace tessera::testing {
namespace {

struct Seen {
  std::string what;  // "put k=v" or "del k"
  int64_t revision;
};

class Collector {
 public:
  void operator()(const etcd::WatchUpdate& u) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!u.status.ok()) {
      ended_ = u.status;
      return;
    }
    for (const auto& e : u.events) {
      if (e.type == etcd::WatchEvent::Type::kPut) {
        seen_.push_back({"put " + e.kv.key + "=" + e.kv.value, e.kv.mod_revision});
      } else {
        seen_.push_back({"del " + e.kv.key, e.kv.mod_revision});
      }
    }
    last_revision_ = u.revision;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.size();
  }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  Status ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  int64_t last_revision() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_revision_;
  }

 private:
  std::mutex mu_;
  std::vector<Seen> seen_;
  Status ended_;
  int64_t last_revision_ = 0;
};

// Applies puts and deletes of a round and returns what a watcher must see for them.
std::vector<std::string> WriteRound(etcd::EtcdClient* c, const std::string& tag, int n) {
  std::vector<std::string> expected;
  for (int i = 0; i < n; ++i) {
    std::string key = "/w/" + tag + std::to_string(i % 4);
    if (i % 5 == 4) {
      auto d = c->Delete(key);
      EXPECT_TRUE(d.ok()) << d.status();
      if (d.ok() && *d > 0) expected.push_back("del " + key);
    } else {
      EXPECT_TRUE(c->Put(key, tag + std::to_string(i)).ok());
      expected.push_back("put " + key + "=" + tag + std::to_string(i));
    }
  }
  return expected;
}

TEST_F(EtcdTest, WatchDeliversEveryPutAndDeleteInOrderAcrossAnEtcdRestart) {
  Collector got;
  etcd::WatchOptions o;
  o.prefix = true;
  auto head = client_->Get("/");
  ASSERT_TRUE(head.ok());
  o.start_revision = head->revision + 1;
  auto watcher = client_->Watch("/w/", o, [&](const etcd::WatchUpdate& u) { got(u); });
  ASSERT_TRUE(client_->Put("/other", "not watched").ok());

  auto expected = WriteRound(client_.get(), "a", 30);
  ASSERT_TRUE(WaitUntil([&] { return got.size() == expected.size(); }, std::chrono::seconds(20)));

  ASSERT_TRUE(server_->Stop().ok());
  ASSERT_TRUE(server_->Start().ok());
  // Written right after the restart, possibly before the watcher has reconnected.
  auto more = WriteRound(client_.get(), "b", 30);
  expected.insert(expected.end(), more.begin(), more.end());
  ASSERT_TRUE(WaitUntil([&] { return got.size() >= expected.size(); }, std::chrono::seconds(30)))
      << "got " << got.size() << " of " << expected.size();

  auto seen = got.seen();
  ASSERT_EQ(seen.size(), expected.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].what, expected[i]) << "event " << i;
    if (i > 0) {
      EXPECT_GT(seen[i].revision, seen[i - 1].revision);
    }
  }
  EXPECT_GE(watcher->connects(), 2);
  EXPECT_TRUE(got.ended().ok());
}

TEST_F(EtcdTest, WatchFromAPastRevisionReplaysHistory) {
  auto r1 = client_->Put("/h/a", "1");
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(client_->Put("/h/a", "2").ok());
  ASSERT_TRUE(client_->Delete("/h/a").ok());
  Collector got;
  etcd::WatchOptions o;
  o.start_revision = *r1;
  auto watcher = client_->Watch("/h/a", o, [&](const etcd::WatchUpdate& u) { got(u); });
  ASSERT_TRUE(WaitUntil([&] { return got.size() == 3; }, std::chrono::seconds(10)));
  auto seen = got.seen();
  EXPECT_EQ(seen[0].what, "put /h/a=1");
  EXPECT_EQ(seen[1].what, "put /h/a=2");
  EXPECT_EQ(seen[2].what, "del /h/a");
}

TEST_F(EtcdTest, ProgressRequestAdvancesTheRevisionWithoutEvents) {
  Collector got;
  etcd::WatchOptions o;
  auto watcher = client_->Watch("/quiet", o, [&](const etcd::WatchUpdate& u) { got(u); });
  ASSERT_TRUE(WaitUntil([&] { return watcher->connected(); }, std::chrono::seconds(10)));
  auto rev = client_->Put("/elsewhere", "x");
  ASSERT_TRUE(rev.ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        (void)watcher->RequestProgress();
        return got.last_revision() >= *rev;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(200)));
  EXPECT_EQ(got.size(), 0u);
  EXPECT_GT(watcher->next_revision(), *rev);
}

TEST_F(EtcdTest, WatchFromACompactedRevisionEndsWithOutOfRange) {
  auto r1 = client_->Put("/c", "1");
  ASSERT_TRUE(r1.ok());
  auto r2 = client_->Put("/c", "2");
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE(client_->Compact(*r2).ok());
  Collector got;
  etcd::WatchOptions o;
  o.start_revision = *r1;
  auto watcher = client_->Watch("/c", o, [&](const etcd::WatchUpdate& u) { got(u); });
  ASSERT_TRUE(WaitUntil([&] { return !got.ended().ok(); }, std::chrono::seconds(10)));
  EXPECT_EQ(got.ended().code(), StatusCode::kOutOfRange);
  EXPECT_NE(got.ended().message().find("compacted"), std::string::npos);
}

TEST_F(EtcdTest, CancelStopsCallbacks) {
  Collector got;
  auto watcher = client_->Watch("/x", {}, [&](const etcd::WatchUpdate& u) { got(u); });
  ASSERT_TRUE(WaitUntil([&] { return watcher->connected(); }, std::chrono::seconds(10)));
  watcher->Cancel();
  ASSERT_TRUE(client_->Put("/x", "after cancel").ok());
  // Prove a later event reached etcd and a fresh watcher sees it, while the cancelled one did not.
  Collector fresh;
  etcd::WatchOptions o;
  o.start_revision = 1;
  auto w2 = client_->Watch("/x", o, [&](const etcd::WatchUpdate& u) { fresh(u); });
  ASSERT_TRUE(WaitUntil([&] { return fresh.size() == 1; }, std::chrono::seconds(10)));
  EXPECT_EQ(got.size(), 0u);
}

}  // namespace
}  // namespace tessera::testing
