// SavePosition, ApplyRollback, CostSaver, LiveNodes, UpdateTrainers (see leader_records.h).
#include "master/leader_records.h"

#include <spdlog/spdlog.h>

#include <map>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "coord/keys.h"

namespace tessera::master {
namespace {

std::string CostKey(const std::string& job, int64_t seq) {
  std::string v = std::to_string(seq);
  return keys::MetricsPrefix(job) + "cost/" + std::string(v.size() < 20 ? 20 - v.size() : 0, '0') + v;
}

}  // namespace

// Saves a consistent checkpoint's data position, fenced by the election; keeps the newest four.
Status SavePosition(etcd::EtcdClient* etcd, const std::string& job, const Fence& fence,
                    const DataPosition& p) {
  etcd::GetOptions list;
  list.prefix = true;
  list.keys_only = true;
  list.sort = etcd::GetOptions::Sort::kKeyAscend;
  TESSERA_ASSIGN_OR_RETURN(auto old, etcd->Get(keys::PositionPrefix(job), list));
  etcd::Txn txn;
  txn.success.push_back(etcd::Op::Put(keys::Position(job, p.version), p.ToJson()));
  const std::string mine = keys::Position(job, p.version);
  std::vector<std::string> older;
  for (const auto& kv : old.kvs) {
    if (kv.key < mine) older.push_back(kv.key);
  }
  for (size_t i = 0; i + 3 < older.size(); ++i) txn.success.push_back(etcd::Op::Delete(older[i]));
  return Election::FencedCommit(etcd, fence, txn).status();
}

// Applies a rollback order newer than the queue's last one: the model was rolled back to the
// consistent checkpoint of a version, so the queue goes back to that version's data position.
Status ApplyRollback(etcd::EtcdClient* etcd, const std::string& job, TaskQueue* queue, StateLog* log,
                     const std::string& settings, int64_t seq) {
  TESSERA_ASSIGN_OR_RETURN(auto order, etcd->Get(keys::Rollback(job)));
  if (order.kvs.empty()) return Status::OK();
  auto j = nlohmann::json::parse(order.kvs[0].value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("version") || !j.contains("generation")) {
    return Status::DataLoss("rollback order at " + keys::Rollback(job) +
                            " is not {version, generation}: " + order.kvs[0].value);
  }
  int64_t version = j["version"].get<int64_t>(), generation = j["generation"].get<int64_t>();
  if (generation <= queue->rewind_generation()) return Status::OK();
  TESSERA_ASSIGN_OR_RETURN(auto saved, etcd->Get(keys::Position(job, version)));
  DataPosition position = DataPosition::Start(queue->tasks());
  if (!saved.kvs.empty()) {
    TESSERA_ASSIGN_OR_RETURN(position, DataPosition::FromJson(saved.kvs[0].value, queue->tasks()));
  } else if (version != 0) {
    return Status::FailedPrecondition("rollback to version " + std::to_string(version) +
                                      " ordered, but no data position is saved for it at " +
                                      keys::Position(job, version));
  }
  TESSERA_RETURN_IF_ERROR(queue->Rewind(position, generation));
  TESSERA_RETURN_IF_ERROR(log->WriteBase(settings, queue->Snapshot(), seq));
  spdlog::info("rolled back to the data position of version {} (rollback {}): pass {}, {} tasks in part",
               version, generation, position.pass + 1, position.partial.size());
  return Status::OK();
}

std::vector<CostPoint> CostSaver::Load() {
  etcd::GetOptions o;
  o.prefix = true;
  auto r = etcd_->Get(keys::MetricsPrefix(job_) + "cost/", o);
  std::vector<CostPoint> out;
  if (!r.ok()) return out;
  for (const auto& kv : r->kvs) {
    auto pts = CostHistory::FromJson(kv.value);
    if (!pts.ok()) {
      spdlog::warn("cost history batch {} is unreadable and skipped: {}", kv.key, pts.status().ToString());
      continue;
    }
    out.insert(out.end(), pts->begin(), pts->end());
    keys_.push_back(kv.key);
  }
  if (!out.empty()) saved_ = out.back().seq;
  return out;
}

void CostSaver::Save(const MasterService& service, const Fence& fence) {
  std::lock_guard<std::mutex> lock(mu_);
  auto points = service.CostSince(saved_);
  if (points.empty()) return;
  etcd::Txn txn;
  const std::string key = CostKey(job_, points.front().seq);
  txn.success.push_back(etcd::Op::Put(key, CostHistory::ToJson(points)));
  while (keys_.size() >= 200) {
    txn.success.push_back(etcd::Op::Delete(keys_.front()));
    keys_.erase(keys_.begin());
  }
  if (!Election::FencedCommit(etcd_, fence, txn).ok()) return;  // tried again next time
  keys_.push_back(key);
  saved_ = points.back().seq;
}

// Registrations as the console's node history sees them.
std::vector<NodeTracker::Live> LiveNodes(const MemberList& l) {
  std::vector<NodeTracker::Live> out;
  for (const auto& m : l.members) {
    auto j = nlohmann::json::parse(m.value, nullptr, false);
    std::string address = !j.is_discarded() && j.is_object() ? j.value("address", "") : "";
    out.push_back({m.name, m.epoch, address, m.value});
  }
  return out;
}

// Updates the console's trainers from `l`: a trainer gone since the last update that left a
// trainers-left record for its registration deregistered on purpose ("finished"), not "lost".
void UpdateTrainers(etcd::EtcdClient* etcd, const std::string& job, const MemberList& l, NodeTracker* nodes) {
  auto live = LiveNodes(l);
  std::map<std::string, int64_t> left;
  // One read per trainer gone; none for a list older than the last taken (a watch that lags
  // behind the periodic listing would otherwise read one for every trainer that joined since).
  for (const auto& name : nodes->Departing("trainer", live, l.revision)) {
    auto kv = etcd->Get(keys::TrainerLeft(job, name));
    if (!kv.ok() || kv->kvs.empty()) continue;
    auto j = nlohmann::json::parse(kv->kvs[0].value, nullptr, false);
    if (j.is_object()) left[name] = j.value("epoch", int64_t{0});
  }
  nodes->Update("trainer", live, WallMillis(), left, l.revision);
}

}  // namespace tessera::master
