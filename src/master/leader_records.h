// What a leading master keeps in etcd beside its task queue's log, and reads back: consistent
// checkpoints' data positions, rollback orders, the console's cost history (CostSaver), and the
// console's view of the registered nodes. Used by MasterNode's runtime (master_node.cc).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "coord/election.h"
#include "coord/etcd_client.h"
#include "coord/registry.h"
#include "master/console_state.h"
#include "master/master_service.h"
#include "master/state_log.h"
#include "master/task_queue.h"

namespace tessera::master {

// Saves a consistent checkpoint's data position, fenced by the election; keeps the newest four.
Status SavePosition(etcd::EtcdClient* etcd, const std::string& job, const Fence& fence,
                    const DataPosition& p);

// Applies a rollback order newer than the queue's last one: the model was rolled back to the
// consistent checkpoint of a version, so the queue goes back to that version's data position.
Status ApplyRollback(etcd::EtcdClient* etcd, const std::string& job, TaskQueue* queue, StateLog* log,
                     const std::string& settings, int64_t seq);

// The console's cost history survives the master: batches of points under metrics/cost/<seq>,
// the newest 200 batches kept (fenced writes).
class CostSaver {
 public:
  CostSaver(etcd::EtcdClient* etcd, std::string job) : etcd_(etcd), job_(std::move(job)) {}
  std::vector<CostPoint> Load();
  // From the saving thread and from a report with evaluations: one at a time.
  void Save(const MasterService& service, const Fence& fence);

 private:
  etcd::EtcdClient* etcd_;
  std::string job_;
  std::mutex mu_;  // guards keys_ and saved_
  std::vector<std::string> keys_;
  int64_t saved_ = 0;
};

// Registrations as the console's node history sees them.
std::vector<NodeTracker::Live> LiveNodes(const MemberList& l);

// Updates the console's trainers from `l`: a trainer gone since the last update that left a
// trainers-left record for its registration deregistered on purpose ("finished"), not "lost".
void UpdateTrainers(etcd::EtcdClient* etcd, const std::string& job, const MemberList& l, NodeTracker* nodes);

}  // namespace tessera::master
