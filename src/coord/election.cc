// Election (see election.h).
#include "coord/election.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "coord/etcd_watch.h"

namespace tessera {

using etcd::Compare;
using etcd::Op;
using etcd::Txn;

Election::Election(etcd::EtcdClient* etcd, std::string prefix, int64_t lease)
    : etcd_(etcd), prefix_(std::move(prefix)), lease_(lease) {}

Status Election::Campaign(const std::string& value, const std::function<bool()>& stop) {
  std::string key = prefix_ + fmt::format("{:016x}", lease_);
  Txn create;
  create.compares.push_back(Compare::Absent(key));
  create.success.push_back(Op::Put(key, value, lease_));
  create.failure.push_back(Op::Get(key));
  TESSERA_ASSIGN_OR_RETURN(etcd::TxnResult created, etcd_->Commit(create));
  if (created.succeeded) {
    fence_ = Fence{key, created.revision};
  } else {
    const auto& kvs = created.results.at(0).range.kvs;
    if (kvs.empty()) return Status::Aborted("election key " + key + " vanished while campaigning");
    fence_ = Fence{key, kvs[0].create_revision};
    if (kvs[0].value != value) TESSERA_RETURN_IF_ERROR(Proclaim(value));
  }

  // One watch on the whole prefix wakes us on any delete: our predecessor's (maybe we lead now)
  // or our own (the lease was lost).
  std::mutex mu;
  std::condition_variable cv;
  int64_t last_delete = 0;
  bool watch_ended = false;
  auto on_update = [&](const etcd::WatchUpdate& u) {
    std::lock_guard<std::mutex> lock(mu);
    if (!u.status.ok()) watch_ended = true;
    for (const auto& ev : u.events) {
      if (ev.type == etcd::WatchEvent::Type::kDelete) last_delete = std::max(last_delete, ev.kv.mod_revision);
    }
    cv.notify_all();
  };
  std::unique_ptr<etcd::Watcher> watcher;
  int64_t watch_from = fence_.revision;
  while (true) {
    if (stop && stop()) return Status::Cancelled("campaign under " + prefix_ + " stopped");
    if (!watcher || watch_ended) {
      if (watcher) watcher->Cancel();
      {
        std::lock_guard<std::mutex> lock(mu);
        watch_ended = false;
      }
      etcd::WatchOptions wo;
      wo.prefix = true;
      wo.start_revision = watch_from;
      watcher = etcd_->Watch(prefix_, wo, on_update);
    }
    etcd::GetOptions o;
    o.prefix = true;
    o.sort = etcd::GetOptions::Sort::kCreateAscend;
    o.keys_only = true;
    o.max_create_revision = fence_.revision;
    TESSERA_ASSIGN_OR_RETURN(etcd::RangeResult older, etcd_->Get(prefix_, o));
    watch_from = older.revision + 1;
    bool own = false;
    for (const auto& kv : older.kvs) own |= kv.key == key && kv.create_revision == fence_.revision;
    if (!own) {
      fence_ = Fence{};
      return Status::Aborted("election key " + key + " is gone (lease lost)");
    }
    if (older.kvs.front().key == key) return Status::OK();  // the oldest candidate: we lead

    std::unique_lock<std::mutex> lock(mu);
    while (last_delete <= older.revision && !watch_ended) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      if (stop && stop()) break;
    }
  }
}

Status Election::Resign() {
  if (!fence_.valid()) return Status::OK();
  Txn txn;
  txn.compares.push_back(Compare::CreateRevision(fence_.key, Compare::Result::kEqual, fence_.revision));
  txn.success.push_back(Op::Delete(fence_.key));
  auto r = etcd_->Commit(txn);
  fence_ = Fence{};
  return r.status();
}

Status Election::Proclaim(const std::string& value) {
  Txn txn;
  txn.success.push_back(Op::Put(fence_.key, value, lease_));
  TESSERA_ASSIGN_OR_RETURN(etcd::TxnResult r, FencedCommit(txn));
  (void)r;
  return Status::OK();
}

StatusOr<etcd::TxnResult> Election::FencedCommit(const etcd::Txn& txn) {
  return FencedCommit(etcd_, fence_, txn);
}

StatusOr<etcd::TxnResult> Election::FencedCommit(etcd::EtcdClient* etcd, const Fence& fence,
                                                 const etcd::Txn& txn) {
  if (!fence.valid()) return Status::FailedPrecondition("not a leader (no election key)");
  Txn outer;
  outer.compares.push_back(Compare::CreateRevision(fence.key, Compare::Result::kEqual, fence.revision));
  outer.success.push_back(Op::Nested(txn));
  TESSERA_ASSIGN_OR_RETURN(etcd::TxnResult r, etcd->Commit(outer));
  if (!r.succeeded) {
    return Status::FailedPrecondition("no longer the leader: election key " + fence.key + " (revision " +
                                      std::to_string(fence.revision) + ") is gone");
  }
  return *r.results.at(0).txn;
}

std::optional<Member> Election::LeaderOf(const MemberList& list) {
  const Member* best = nullptr;
  for (const auto& m : list.members) {
    if (!best || m.epoch < best->epoch) best = &m;
  }
  if (!best) return std::nullopt;
  return *best;
}

StatusOr<std::optional<Member>> Election::Leader(etcd::EtcdClient* etcd, const std::string& prefix) {
  etcd::GetOptions o;
  o.prefix = true;
  o.sort = etcd::GetOptions::Sort::kCreateAscend;
  o.limit = 1;
  TESSERA_ASSIGN_OR_RETURN(etcd::RangeResult r, etcd->Get(prefix, o));
  return LeaderOf(MembersFromRange(prefix, r));
}

}  // namespace tessera
