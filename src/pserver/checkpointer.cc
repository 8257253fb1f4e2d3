// Checkpointer (see checkpointer.h).
#include "pserver/checkpointer.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "coord/keys.h"

namespace tessera {

namespace fs = std::filesystem;

Checkpointer::Checkpointer(etcd::EtcdClient* etcd, std::string job, int index, int64_t epoch, std::string dir)
    : etcd_(etcd), job_(std::move(job)), index_(index), epoch_(epoch), dir_(std::move(dir)) {}

StatusOr<CheckpointRecord> Checkpointer::Save(const Checkpoint& c) {
  TESSERA_ASSIGN_OR_RETURN(WrittenCheckpoint w, WriteCheckpoint(dir_, c));
  const std::string key = keys::Checkpoint(job_, index_);
  CheckpointRecord rec{w.uuid, w.digest, c.version, c.created_ms, w.bytes};
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
    for (const auto& r : keep) kept |= name == prefix + r.uuid + ".tsck";
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
  std::map<std::string, CheckpointFileState> files;
  for (const auto& r : records) files[r.uuid] = ProbeCheckpointFile(CheckpointPath(dir_, job_, index_, r.uuid), r.digest);
  while (true) {
    CheckpointChoice choice = ChooseCheckpoint(records, files);
    for (const auto& why : choice.refused) spdlog::error("pserver {}: not loading {}", index_, why);
    if (!choice.load) return std::optional<Checkpoint>();
    auto c = ReadCheckpoint(CheckpointPath(dir_, job_, index_, choice.load->uuid), choice.load->digest);
    if (c.ok() && c->job == job_ && c->index == index_) return std::optional<Checkpoint>(std::move(*c));
    spdlog::error("pserver {}: not loading checkpoint {}: {}", index_, choice.load->uuid,
                  c.ok() ? "it belongs to another job or index" : c.status().ToString());
    files[choice.load->uuid] = CheckpointFileState::kCorrupt;
  }
}

}  // namespace tessera
