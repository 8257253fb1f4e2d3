// Registry: membership under an etcd prefix. pservers claim the lowest free index 0..N-1 in one
// transaction; trainers register a named member; anyone lists or watches the members. Every
// member key is attached to its owner's lease, so a dead member disappears after the TTL, and
// carries its epoch: the revision that created the key. A member that comes back after its key
// expired gets a new, larger epoch, which is how servers tell stale clients from current ones.
//
// Thread-safety: Registry methods may be called from any thread. MemberWatch calls its callback
// on its own thread, one call at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coord/etcd_client.h"
#include "coord/etcd_watch.h"
#include "coord/member.h"
#include "tessera/status.h"

namespace tessera {

// The `count` lowest numeric member names not in `list`, ascending (pure).
std::vector<int> LowestFreeIndices(const MemberList& list, int count);

// The indices a claimer of the lowest free index tries, in order (pure). At the first attempt the
// `count` lowest free ones in order, so a claimer alone gets the lowest. After losing races (every
// candidate taken by others first), `count` of the count x 4^attempt lowest free ones (at most
// count x 1,024), in an order drawn from `seed`: claimers racing at once then spread over ever
// more indices, and a storm of N joins settles in about log4(N / count) rounds instead of N / count.
std::vector<int> ClaimCandidates(const MemberList& list, int attempt, int count, uint64_t seed);

struct Claim {
  int index = -1;
  int64_t epoch = 0;
  std::string key;
};

class MemberWatch;

class Registry {
 public:
  // `prefix` ends with '/', e.g. keys::PserverPrefix(job).
  Registry(etcd::EtcdClient* etcd, std::string prefix);

  // Claims the lowest free index in [0, n) with one nested transaction ("if 0 is free take it,
  // else if 1 is free ..."), attaching `lease`. ResourceExhausted when all n are taken.
  // Safe against a retried transaction: an index this lease already holds is reused, and a
  // second one is released. With `only` >= 0, claims that index and no other.
  StatusOr<Claim> ClaimIndex(int n, const std::string& value, int64_t lease, int only = -1);

  // Claims the lowest free index with no upper bound (trainer ids): the same transaction over
  // the lowest free indices a listing shows, tried again (up to `attempts` times) when others
  // took them all first. Aborted when every attempt lost its race.
  StatusOr<Claim> ClaimLowestFree(const std::string& value, int64_t lease, int attempts = 20);

  // Registers member `name` with `lease`; returns its epoch. AlreadyExists if another lease
  // holds the name (a retry of our own registration succeeds).
  StatusOr<int64_t> Register(const std::string& name, const std::string& value, int64_t lease);

  // Replaces our member's value, only if the key is still the one created at `epoch`.
  Status Update(const std::string& name, const std::string& value, int64_t epoch, int64_t lease);

  // Removes our member, only if the key is still the one created at `epoch`; `also` runs in the
  // same transaction when it does (e.g. a record that the member left on purpose).
  Status Deregister(const std::string& name, int64_t epoch, const std::vector<etcd::Op>& also = {});

  StatusOr<MemberList> List();
  // The members without their values (what a claim needs: names, epochs, leases), a fraction of
  // the bytes when there are many.
  StatusOr<MemberList> ListKeys();

  // Watches the members: calls `on_change` with the full list once at start and after every
  // change. Survives etcd restarts and history compaction (it re-lists).
  std::unique_ptr<MemberWatch> Watch(std::function<void(const MemberList&)> on_change);
  // The same, but `on_changes` gets what changed (the whole list only when it was read whole):
  // O(changes) a call where Watch's callback gets a copy of all N members. For the watchers of
  // a job's trainers, whose every join would otherwise cost each of them O(N).
  std::unique_ptr<MemberWatch> WatchChanges(std::function<void(const MemberChanges&)> on_changes);

  const std::string& prefix() const { return prefix_; }

 private:
  etcd::EtcdClient* etcd_;
  // The transaction behind both claims: the first of `candidates` that is free, in order.
  // Claim.index < 0 when all were taken.
  StatusOr<Claim> ClaimFirstFree(const std::vector<int>& candidates, const std::string& value, int64_t lease);
  // The members under this prefix that hold `lease` (without one: every member without a
  // lease), but `except`.
  StatusOr<std::vector<Member>> KeysOfLease(int64_t lease, const std::string& except);

  std::string prefix_;
};

class MemberWatch {
 public:
  ~MemberWatch();
  MemberWatch(const MemberWatch&) = delete;
  MemberWatch& operator=(const MemberWatch&) = delete;

  MemberList Snapshot() const;
  // Blocks until `pred(list)` holds or `timeout` passes; returns whether it held.
  bool WaitFor(const std::function<bool(const MemberList&)>& pred, std::chrono::milliseconds timeout);
  void Cancel();

 private:
  friend class Registry;
  MemberWatch(etcd::EtcdClient* etcd, std::string prefix, std::function<void(const MemberList&)> on_change,
              std::function<void(const MemberChanges&)> on_changes);
  void Run();
  void Apply(const etcd::WatchUpdate& u);

  etcd::EtcdClient* etcd_;
  const std::string prefix_;
  std::function<void(const MemberList&)> on_change_;
  std::function<void(const MemberChanges&)> on_changes_;

  mutable std::mutex mu_;  // guards list_, restart_, and is the lock for cv_
  MemberList list_;
  bool restart_ = false;  // the watch ended (history compacted): re-list
  std::condition_variable cv_;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
};

// Parses a member list out of range results under `prefix`.
MemberList MembersFromRange(const std::string& prefix, const etcd::RangeResult& range);

}  // namespace tessera
