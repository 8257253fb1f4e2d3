// The two ways a pserver process serves once started (PserverNode::Startup), each an object
// whose methods are the phases of its run. Internal to the pserver node.
//  - OneIndex (pserver_node_one_index.cc): claims an index of the slot map, serves its slots
//    with one PserverService (restored from its checkpoint), writes checkpoints, feeds trainer
//    departures to the service, and stops at once when its registration goes.
//  - ReplicatedHost (pserver_node_replicas.cc): a host of a job with replicas or elastic
//    pservers: claims a host index and, every 50 ms, brings the shards it holds in line with the
//    replica map and the live hosts.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "common/clock.h"
#include "coord/registry.h"
#include "job/replica_map.h"
#include "pserver/pserver_node_startup.h"
#include "pserver/replica_streams.h"
#include "pserver/shard_router.h"

namespace tessera {

class PserverNode::OneIndex {
 public:
  explicit OneIndex(Startup* up);
  ~OneIndex();
  Status Run();

 private:
  PserverServiceOptions ServiceOptions() const;
  Status StartService();  // the service, its checkpoint restored, installed; the checkpoints
  void Watch();           // trainers leaving; this pserver's own registration going
  Status Serve();         // until Stop() or the run is lost
  void Drain(const Status& result);

  Startup* up_;
  PserverNode* node_;
  Registry registry_;
  Claim claim_;
  bool consistent_ = false;  // checkpoints at the job's checkpoint steps
  std::unique_ptr<PserverService> service_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::thread checkpoint_thread_;
  std::mutex trainers_mu_;
  MemberEpochs trainers_;  // guarded by trainers_mu_
  std::unique_ptr<MemberWatch> trainer_watch_, self_watch_;
};

class PserverNode::ReplicatedHost {
 public:
  explicit ReplicatedHost(Startup* up);
  ~ReplicatedHost();
  Status Run();

 private:
  struct MapAt {
    ReplicaMap map;
    int64_t revision = 0;  // the key's mod revision (0: absent)
  };
  // One turn of the control loop: another turn, or the end of the run (stopping, drained);
  // kGoOn: go on with this turn.
  enum class Turn { kGoOn, kAgain, kEnd };
  Turn Tick(bool stopping);
  StatusOr<MapAt> ReadMap(const etcd::CallOptions& call = {});
  StatusOr<bool> SwapMap(const MapAt& at, const ReplicaMap& next);  // false: another host changed it first
  PserverServiceOptions ServiceOptions(int shard, bool backup, int64_t epoch) const;
  void Watch();
  // Fails over one gone holder's shards (this host itself when it restarted); true if the map
  // changed (read it again).
  bool FailOverGone(const MapAt& at, const std::map<int, Member>& alive);
  // While stopping: whether to end now, after marking this host leaving and handing its
  // primaries over when others stay (an elastic job shrinking).
  Turn DecideStop(const ReplicaMap& map, const std::vector<int>& staying);
  // Serves shard `s` as its primary: registration, service, streams to its backups and new
  // copies, a copy added to the map, a handover. true if the map changed (read it again).
  bool ServePrimary(int s, const MapAt& at, const std::map<int, Member>& alive,
                    const std::vector<ReplicaMap::Copy>& plan, const std::vector<ReplicaMap::Move>& moves);
  std::shared_ptr<PserverService> BecomePrimary(int s, std::shared_ptr<PserverService> service);
  void KeepStreams(int s, ShardOutbox& box, const ReplicaMap& map, const std::map<int, Member>& alive,
                   const std::vector<ReplicaMap::Copy>& plan, const std::vector<ReplicaMap::Move>& moves);
  bool RecordNewCopy(int s, ShardOutbox& box, const MapAt& at, const std::vector<ReplicaMap::Copy>& plan);
  bool HandOver(int s, PserverService& service, ShardOutbox& box, const MapAt& at,
                const std::vector<ReplicaMap::Move>& moves);
  void Drain(const Status& result);
  void WarnOnce(const std::string& what);

  Startup* up_;
  PserverNode* node_;
  const std::string& job_;
  const JobConfig& config_;
  const int shards_;
  const int64_t lease_;
  Registry hosts_, shard_registry_;
  Claim host_;
  int me_ = -1;
  ShardRouter router_;
  std::mutex live_mu_;
  std::map<int, Member> live_;               // host index -> registration; guarded by live_mu_
  MemberEpochs trainers_;                    // the trainer watch's own
  std::unique_ptr<MemberWatch> host_watch_, trainer_watch_;
  std::map<int, Claim> claims_;                           // shard registrations held
  std::map<int, std::unique_ptr<ShardOutbox>> outboxes_;  // shards served as primary
  std::map<int, std::unique_ptr<Checkpointer>> checkpointers_;
  std::vector<std::thread> checkpoint_threads_;
  std::vector<std::shared_ptr<PserverService>> retired_;  // handed over: kept for their checkpoint threads
  bool forgot_self_ = false;
  bool draining_ = false;  // Stop() came: handing the primaries over before exiting
  TimePoint drain_deadline_;
  std::set<int> seen_;  // hosts seen registered
  const TimePoint started_;
  std::set<std::string> said_;  // warnings given once
};

}  // namespace tessera
