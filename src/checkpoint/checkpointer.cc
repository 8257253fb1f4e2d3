// Checkpointer (see checkpointer.h).
#include "checkpoint/checkpointer.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "checkpoint/checkpoint_delta.h"
#include "coord/keys.h"

namespace tessera {

namespace fs = std::filesystem;

Checkpointer::Checkpointer(etcd::EtcdClient* etcd, std::string job, int index, int64_t epoch, std::string dir)
    : etcd_(etcd), job_(std::move(job)), index_(index), epoch_(epoch), dir_(std::move(dir)) {}

StatusOr<CheckpointRecord> Checkpointer::Save(Checkpoint c) {
  std::vector<CheckpointLink> chain;
  if (c.shard.delta) {
    if (!head_ || head_gen_ != c.gen - 1) {
      return Status::FailedPrecondition("pserver " + std::to_string(index_) +
                                        ": a delta that does not build on the last recorded checkpoint");
    }
    c.parent = head_->uuid;
    chain = head_->Files();
  } else {
    c.parent.clear();
  }
  TESSERA_ASSIGN_OR_RETURN(WrittenCheckpoint w, WriteCheckpoint(dir_, c));
  const std::string key = keys::Checkpoint(job_, index_);
  CheckpointRecord rec{w.uuid, w.digest, c.version, c.created_ms, w.bytes, std::move(chain)};
  for (int attempt = 0; attempt < 5; ++attempt) {
    TESSERA_ASSIGN_OR_RETURN(auto cur, etcd_->Get(key));
    std::vector<CheckpointRecord> records;
    int64_t mod = 0;
    if (!cur.kvs.empty()) {
      mod = cur.kvs[0].mod_revision;
      auto d = DecodeCheckpointRecords(cur.kvs[0].value);
      if (d.ok()) {
        records = *d;
      } else {
        spdlog::warn("checkpoint record of pserver {} is unreadable and is replaced: {}", index_,
                     d.status().ToString());
      }
    }
    auto next = WithNewCheckpoint(records, rec);
    etcd::Txn txn;
    txn.compares.push_back(
        etcd::Compare::CreateRevision(keys::Pserver(job_, index_), etcd::Compare::Result::kEqual, epoch_));
    txn.compares.push_back(mod == 0 ? etcd::Compare::Absent(key)
                                    : etcd::Compare::ModRevision(key, etcd::Compare::Result::kEqual, mod));
    txn.success.push_back(etcd::Op::Put(key, EncodeCheckpointRecords(next)));
    txn.failure.push_back(etcd::Op::Get(keys::Pserver(job_, index_)));
    TESSERA_ASSIGN_OR_RETURN(auto r, etcd_->Commit(txn));
    if (r.succeeded) {
      Prune(next);
      head_ = rec;
      head_gen_ = c.gen;
      return rec;
    }
    const auto& owner = r.results.at(0).range.kvs;
    if (owner.empty() || owner[0].create_revision != epoch_) {
      std::error_code ec;
      fs::remove(w.path, ec);
      return Status::FailedPrecondition("pserver " + std::to_string(index_) + " (epoch " +
                                        std::to_string(epoch_) +
                                        ") no longer holds its index: checkpoint not recorded");
    }
    // The record changed under us (another writer of this index?): read it again.
  }
  return Status::Aborted("checkpoint record of pserver " + std::to_string(index_) + " kept changing");
}

void Checkpointer::Prune(const std::vector<CheckpointRecord>& keep) {
  const std::string prefix = job_ + "-ps" + std::to_string(index_) + "-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    bool kept = false;
    for (const auto& r : keep)
      for (const auto& f : r.Files()) kept |= name == prefix + f.uuid + ".tsck";
    if (!kept) fs::remove(e.path(), ec);  // older checkpoints, and temp files of crashed writes
  }
}

StatusOr<std::optional<Checkpoint>> Checkpointer::LoadLatest() {
  TESSERA_ASSIGN_OR_RETURN(auto cur, etcd_->Get(keys::Checkpoint(job_, index_)));
  if (cur.kvs.empty()) return std::optional<Checkpoint>();
  TESSERA_ASSIGN_OR_RETURN(auto records, DecodeCheckpointRecords(cur.kvs[0].value));
  // Files of this index that no record names were written by a pserver that died (or was fenced)
  // before recording them: nobody will ever load them.
  Prune(records);
  std::map<std::string, CheckpointFileState> files = ProbeCheckpointFiles(dir_, job_, index_, records);
  for (size_t attempt = 0; attempt <= files.size(); ++attempt) {  // each failure rules out a file
    CheckpointChoice choice = ChooseCheckpoint(records, files);
    for (const auto& why : choice.refused) spdlog::error("pserver {}: not loading {}", index_, why);
    if (!choice.load) return std::optional<Checkpoint>();
    std::string bad;
    auto c = ReadChain(*choice.load, &bad);
    if (c.ok()) {
      loaded_ = *choice.load;
      return std::optional<Checkpoint>(std::move(*c));
    }
    spdlog::error("pserver {}: not loading checkpoint {}: {}", index_, choice.load->uuid,
                  c.status().ToString());
    files[bad] = CheckpointFileState::kCorrupt;
  }
  return std::optional<Checkpoint>();
}

StatusOr<Checkpoint> Checkpointer::ReadChain(const CheckpointRecord& record, std::string* bad) {
  Checkpoint whole;
  std::vector<ShardSnapshot> deltas;
  std::string parent;
  for (const auto& f : record.Files()) {
    *bad = f.uuid;
    TESSERA_ASSIGN_OR_RETURN(Checkpoint c,
                             ReadCheckpoint(CheckpointPath(dir_, job_, index_, f.uuid), f.digest));
    if (c.job != job_ || c.index != index_)
      return Status::DataLoss("checkpoint " + f.uuid + " belongs to another job or index");
    if (c.parent != parent) {
      return Status::DataLoss("checkpoint " + f.uuid + " applies on " +
                              (c.parent.empty() ? "nothing" : c.parent) + ", but its record puts it after " +
                              (parent.empty() ? "nothing" : parent));
    }
    if (parent.empty()) {
      whole = std::move(c);
    } else {
      deltas.push_back(std::move(c.shard));
      whole.version = c.version;
      whole.created_ms = c.created_ms;
    }
    parent = f.uuid;
  }
  // Every file read and checked: `bad` stays the last one if they do not fit together.
  TESSERA_RETURN_IF_ERROR(ApplyDeltas(&whole.shard, deltas).WithContext("checkpoint " + record.uuid));
  if (!deltas.empty()) {
    spdlog::info("pserver {}: checkpoint of version {} rebuilt from the base of version {} and {} delta{}",
                 index_, record.version, record.chain[0].version, deltas.size(),
                 deltas.size() == 1 ? "" : "s");
  }
  return whole;
}

void Checkpointer::Continue(int64_t gen) {
  if (!loaded_) return;
  head_ = std::move(loaded_);
  loaded_.reset();
  head_gen_ = gen;
}

CheckpointChainState Checkpointer::chain() const {
  if (!head_) return {};
  CheckpointChainState s;
  s.gen = head_gen_;
  const auto files = head_->Files();
  s.base_bytes = files[0].bytes;
  for (size_t i = 1; i < files.size(); ++i) s.delta_bytes += files[i].bytes;
  s.deltas = static_cast<int>(files.size()) - 1;
  return s;
}

}  // namespace tessera
