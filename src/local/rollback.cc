// Rollback to a consistent checkpoint (see rollback.h).
#include "local/rollback.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/checkpoint_choice.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_probe.h"
#include "common/strings.h"
#include "coord/keys.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "master/position.h"

namespace tessera::local {

StatusOr<std::optional<Rollback>> PrepareRollback(etcd::EtcdClient* etcd, const std::string& job,
                                                  const std::string& checkpoint_dir,
                                                  std::string* passed_over) {
  TESSERA_ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(etcd, job));
  if (config.checkpoint_steps <= 0) return std::optional<Rollback>();
  Rollback out;
  std::map<int, std::vector<CheckpointRecord>> records;
  std::map<int, std::set<int64_t>> good;
  for (int i = 0; i < config.pservers; ++i) {
    TESSERA_ASSIGN_OR_RETURN(auto cur, etcd->Get(keys::Checkpoint(job, i)));
    if (cur.kvs.empty()) continue;
    auto decoded = DecodeCheckpointRecords(cur.kvs[0].value);
    if (!decoded.ok()) {
      out.note +=
          "pserver " + std::to_string(i) + ": unreadable record (" + decoded.status().message() + "); ";
      continue;
    }
    records[i] = *decoded;
    const auto files = checkpoint_dir.empty() ? std::map<std::string, CheckpointFileState>()
                                              : ProbeCheckpointFiles(checkpoint_dir, job, i, *decoded);
    for (const auto& r : *decoded) {
      if (!checkpoint_dir.empty()) {
        const ChainFileState state = StateOfChain(r, files);
        if (state.state != CheckpointFileState::kGood) {
          out.note += "pserver " + std::to_string(i) + " version " + std::to_string(r.version) + ": " +
                      state.which +
                      (state.state == CheckpointFileState::kCorrupt ? " is corrupt" : " is missing") + "; ";
          continue;
        }
      }
      good[i].insert(r.version);
    }
  }
  etcd::GetOptions list;
  list.prefix = true;
  list.keys_only = true;
  TESSERA_ASSIGN_OR_RETURN(auto saved, etcd->Get(keys::PositionPrefix(job), list));
  std::set<int64_t> positions;
  std::map<int64_t, std::string> position_keys;
  for (const auto& kv : saved.kvs) {
    auto v = ParseInt64(std::string(keys::LastElement(kv.key)), "position version");
    if (!v.ok()) continue;
    positions.insert(*v);
    position_keys[*v] = kv.key;
  }
  auto version = master::ChooseRollbackVersion(config.pservers, good, positions);
  if (!version) {
    // What there was, for the log: what was passed over, each pserver's good versions, the
    // saved positions.
    if (passed_over)
      *passed_over = out.note + master::DescribeRollbackCandidates(config.pservers, good, positions);
    return std::optional<Rollback>();
  }
  out.version = *version;

  TESSERA_ASSIGN_OR_RETURN(auto order, etcd->Get(keys::Rollback(job)));
  if (!order.kvs.empty()) {
    auto j = nlohmann::json::parse(order.kvs[0].value, nullptr, false);
    if (!j.is_discarded() && j.is_object()) out.generation = j.value("generation", int64_t{0});
  }
  ++out.generation;
  etcd::Txn txn;
  for (const auto& [i, recs] : records) {
    std::vector<CheckpointRecord> keep;
    for (const auto& r : recs) {
      if (r.version <= out.version) keep.push_back(r);
    }
    txn.success.push_back(etcd::Op::Put(keys::Checkpoint(job, i), EncodeCheckpointRecords(keep)));
  }
  for (const auto& [v, key] : position_keys) {
    if (v > out.version) txn.success.push_back(etcd::Op::Delete(key));
  }
  nlohmann::json j = {{"version", out.version}, {"generation", out.generation}};
  txn.success.push_back(etcd::Op::Put(keys::Rollback(job), j.dump()));
  TESSERA_RETURN_IF_ERROR(etcd->Commit(txn).status());
  return std::optional<Rollback>(out);
}

Status RevokeJobLeases(etcd::EtcdClient* etcd, const std::string& job) {
  etcd::GetOptions all;
  all.prefix = true;
  all.keys_only = true;
  TESSERA_ASSIGN_OR_RETURN(auto kvs, etcd->Get(keys::Job(job), all));
  std::set<int64_t> leases;
  for (const auto& kv : kvs.kvs) {
    if (kv.lease != 0) leases.insert(kv.lease);
  }
  for (int64_t lease : leases) {
    Status s = etcd->RevokeLease(lease);
    if (!s.ok() && s.code() != StatusCode::kNotFound)
      return s.WithContext("revoking lease " + std::to_string(lease));
  }
  return Status::OK();
}

}  // namespace tessera::local
