// ReplicaMap: which pservers hold each hash slot when a job keeps R copies of every slot
// (`--replicas R`): an ordered list per slot, the primary first, then its backups, on distinct
// pservers, with an epoch that every change raises (so a stale map is recognised and fenced).
// Pure: no etcd, no clocks; the decisions of failover, re-replication and rebalancing are
// computed here and applied by the shells that own the I/O. A value type.
//
// Placement spreads both roles evenly: slot s's primary is pserver s % P, its k-th backup
// pserver (s + k * stride) % P for a stride that keeps the R copies distinct, so losing one
// pserver moves about S/P primaries, spread over the others rather than onto one.
#pragma once

#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera {

class ReplicaMap {
 public:
  // A copy to make: slot `slot` from pserver `from` (a live replica) onto pserver `to`.
  struct Copy {
    int slot, from, to;
    bool operator==(const Copy&) const = default;
  };

  ReplicaMap() = default;
  // R copies of each of `slots` slots over `pservers` pservers. InvalidArgument unless
  // 1 <= replicas <= pservers and slots >= pservers.
  static StatusOr<ReplicaMap> Place(int slots, int pservers, int replicas);
  // One copy of each slot, its primary on pserver s % `first` (default: every pserver), and
  // `replicas` wanted: the start of a job whose backups are added (WithCopies) once they hold the
  // slots, and of an elastic job that starts with `first` of its `pservers`.
  static StatusOr<ReplicaMap> PrimariesOnly(int slots, int pservers, int replicas, int first = 0);
  bool Holds(int slot, int pserver) const;

  int slots() const { return static_cast<int>(holders_.size()); }
  int pservers() const { return pservers_; }
  int replicas() const { return replicas_; }  // the copies each slot should have
  int64_t epoch() const { return epoch_; }
  // REQUIRES: 0 <= slot < slots(). The primary first.
  const std::vector<int>& HoldersOf(int slot) const { return holders_[slot]; }
  int PrimaryOf(int slot) const { return holders_[slot].front(); }
  std::vector<int> PrimarySlotsOf(int pserver) const;
  std::vector<int> BackupSlotsOf(int pserver) const;
  // Slots with fewer live copies than replicas().
  std::vector<int> UnderReplicated() const;

  // Pserver `dead` is gone: it leaves every slot; where it was the primary, the first backup
  // takes over. The epoch rises. DataLoss naming the slots if it held the only copy of any
  // (nothing is changed then).
  StatusOr<ReplicaMap> FailOver(int dead) const;

  // The copies that bring every slot back to replicas() copies on the `live` pservers: each
  // new copy goes to the live pserver holding the fewest slots that does not hold this one
  // already, copied from the slot's primary. Fewer copies when too few pservers are live.
  std::vector<Copy> RestorePlan(const std::vector<int>& live) const;
  // The map once the copies of a plan are in place (each becomes a backup). The epoch rises.
  // InvalidArgument for a copy that does not fit this map (a slot it already holds, a source
  // that does not hold it).
  StatusOr<ReplicaMap> WithCopies(const std::vector<Copy>& copies) const;

  // Elastic pservers. A primary to hand over: slot `slot` from pserver `from` to `to`.
  struct Move {
    int slot, from, to;
    bool operator==(const Move&) const = default;
  };
  // The moves that spread the primaries evenly over the `live` pservers that are not `leaving`
  // (each ends with floor or ceil of slots / their number) and take every primary off the
  // leaving ones: from the pserver with the most primaries (leaving ones first) to the one with
  // the fewest, lowest slot first, ties to the lowest index. Empty when balanced, or when no
  // pserver can take them. Backups are not moved (RestorePlan places missing ones).
  std::vector<Move> BalancePlan(const std::vector<int>& live, const std::vector<int>& leaving) const;
  // The map once `to` is slot's primary in place of the old one, which leaves the slot (the
  // backups stay; `to` stops being one if it was). The copy must be in place first (the shell
  // streams it). The epoch rises. InvalidArgument for a slot or pserver out of range, or `to`
  // already the primary.
  StatusOr<ReplicaMap> Handover(int slot, int to) const;
  // Slots pserver `p` holds a copy of (primary or backup).
  std::vector<int> SlotsHeldBy(int p) const;

  static StatusOr<ReplicaMap> FromJson(const std::string& json);
  std::string ToJson() const;
  // Every slot has 1..replicas distinct holders in [0, pservers).
  Status Validate() const;
  bool operator==(const ReplicaMap&) const = default;

 private:
  std::vector<std::vector<int>> holders_;
  int pservers_ = 0;
  int replicas_ = 1;
  int64_t epoch_ = 1;
};

}  // namespace tessera
