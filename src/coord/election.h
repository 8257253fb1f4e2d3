// Election: leader election over an etcd prefix, as etcd's own concurrency recipe does it.
// Each candidate creates "<prefix><lease id>" attached to its lease; the candidate whose key is
// oldest (lowest create revision) leads; the others each wait for the key just older than
// theirs to disappear. When a leader dies its lease expires, its key goes, the next one leads.
//
// Fencing: a leader's authority is its Fence {key, create revision}. A FencedCommit runs a
// transaction only if that key still exists with that create revision, so a leader that was
// deposed (its lease expired while it was stalled or cut off) cannot write over its successor,
// even if it does not yet know it was deposed.
//
// Thread-safety: Campaign() blocks its caller; the other methods may be called from any thread.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "coord/etcd_client.h"
#include "coord/registry.h"
#include "tessera/status.h"

namespace tessera {

struct Fence {
  std::string key;
  int64_t revision = 0;  // create revision of `key`
  bool valid() const { return revision > 0; }
};

class Election {
 public:
  // `prefix` ends with '/', e.g. keys::MasterElectionPrefix(job). `lease` must be kept alive by
  // the caller (a LeaseKeeper).
  Election(etcd::EtcdClient* etcd, std::string prefix, int64_t lease);

  // Blocks until this candidate leads. Returns Cancelled when `stop()` becomes true (checked a
  // few times a second), Aborted when our candidate key disappears (the lease was lost).
  Status Campaign(const std::string& value, const std::function<bool()>& stop = nullptr);

  // Gives up leadership (or candidacy): deletes our key if it is still ours.
  Status Resign();

  // Updates the value the leader advertises (its address), fenced.
  Status Proclaim(const std::string& value);

  const Fence& fence() const { return fence_; }

  // Commits `txn` only while this candidate leads. FailedPrecondition if it does not; otherwise
  // the result of `txn` itself (whose own compares may still fail).
  StatusOr<etcd::TxnResult> FencedCommit(const etcd::Txn& txn);
  static StatusOr<etcd::TxnResult> FencedCommit(etcd::EtcdClient* etcd, const Fence& fence,
                                                const etcd::Txn& txn);

  // The current leader under `prefix`, if any.
  static StatusOr<std::optional<Member>> Leader(etcd::EtcdClient* etcd, const std::string& prefix);

  // The leader in a member list (the oldest key), if any.
  static std::optional<Member> LeaderOf(const MemberList& list);

 private:
  etcd::EtcdClient* etcd_;
  std::string prefix_;
  int64_t lease_;
  Fence fence_;
};

}  // namespace tessera
