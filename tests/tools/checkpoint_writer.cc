// checkpoint_writer: saves checkpoints of a synthetic shard in a loop, as fast as it can, for the
// crash test (tests/ps/checkpoint_crash_test.cc kills it at random moments). It holds pserver
// index 0 of the job with a plain key (no lease), created once and reused, so its records pass
// the checkpointer's fence. Prints "SAVED <version> whole|delta" after each recorded checkpoint.
//
// Whole checkpoints (the default): version v's shard has every dense value equal to v and every
// sparse row filled with v, so a reader can tell a whole checkpoint from a mixed one.
//
// --deltas: incremental checkpoints of a live store, as a pserver takes them (the default delta
// policy). Version 1 sets all of ExpectedRows' rows to 1; each later version v sets the 1% of
// rows with key % 100 == v % 100 to v and adds the row kDeltaNewKey + v with value v, and every
// dense value to v. It starts from what LoadLatest gives, so the state a reader finds is a
// function of its version alone (CheckpointWriterExpects below). Test-only.
#include "checkpoint_writer.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "checkpoint/checkpointer.h"
#include "checkpoint/delta_policy.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "job/slot_map.h"
#include "pserver/shard_store.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

void Saved(const StatusOr<CheckpointRecord>& rec, int64_t v) {
  if (!rec.ok()) {
    std::printf("ERROR %s\n", rec.status().ToString().c_str());
    std::exit(1);
  }
  std::printf("SAVED %lld %s\n", static_cast<long long>(v), rec->delta() ? "delta" : "whole");
  std::fflush(stdout);
}

// Sets `keys` of `table` to `value` through the optimizer (sgd, lr 1: the gradient is the
// difference), as a trainer's push would.
void SetRows(ShardStore& store, const std::vector<uint64_t>& keys, float value) {
  std::vector<float> cur(keys.size() * 8);
  store.ReadSparse("emb", keys, cur.data());
  for (auto& x : cur) x -= value;
  store.ApplySparse("emb", keys, cur.data(), 1.0f);
}

[[noreturn]] void WriteDeltas(etcd::EtcdClient* etcd, const std::string& job, int64_t epoch,
                              const std::string& dir) {
  JobConfig cfg;
  cfg.pservers = 1;
  cfg.slots = 16;
  cfg.block_size = 1 << 16;
  ShardStore store(0, cfg, SlotMap::RoundRobin(cfg.slots, 1));
  if (!store.Declare({"w", false, kDeltaDenseFloats, 0, OptimizerConfig{}, {}}).ok() ||
      !store.Declare({"emb", true, 0, 8, *OptimizerConfig::Parse("sgd:lr=1"), InitializerConfig{}}).ok())
    std::exit(2);
  Checkpointer ck(etcd, job, 0, epoch, dir);
  int64_t v = 0;
  auto latest = ck.LoadLatest();
  if (!latest.ok()) std::exit(2);
  if (*latest) {
    if (!store.Restore((*latest)->shard).ok()) std::exit(3);
    ck.Continue(store.checkpoint_gen());
    v = (*latest)->version;
  }
  const DeltaPolicy policy;
  std::vector<float> dense(kDeltaDenseFloats);
  while (true) {
    ++v;
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < kDeltaRows; ++k)
      if (v == 1 || static_cast<int64_t>(k % 100) == v % 100) keys.push_back(k);
    if (v >= 2) keys.push_back(kDeltaNewKey + v);
    SetRows(store, keys, static_cast<float>(v));
    std::fill(dense.begin(), dense.end(), static_cast<float>(v));
    store.SetDense("w", 0, dense.data());
    const bool delta =
        ChooseCheckpointKind(ck.chain(), store.checkpoint_gen(), store.DeltaBytes(), policy).delta;
    Checkpoint c{job, 0, v, v, store.CheckpointSnapshot(delta)};
    c.gen = store.checkpoint_gen();
    Saved(ck.Save(std::move(c)), v);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"checkpoint crash-test writer"};
  std::string etcd_ep, job = "crash", dir;
  int64_t floats = 1 << 20;
  bool deltas = false;
  app.add_option("--etcd", etcd_ep)->required();
  app.add_option("--job", job);
  app.add_option("--dir", dir)->required();
  app.add_option("--floats", floats);
  app.add_flag("--deltas", deltas);
  CLI11_PARSE(app, argc, argv);
  etcd::EtcdOptions eo;
  eo.endpoints = {etcd_ep};
  auto etcd = etcd::EtcdClient::Create(eo);
  if (!etcd.ok()) return 2;
  const std::string key = keys::Pserver(job, 0);
  auto cur = (*etcd)->Get(key);
  if (!cur.ok()) return 2;
  int64_t epoch = 0;
  if (cur->kvs.empty()) {
    if (!(*etcd)->Put(key, "{}").ok()) return 2;
    epoch = (*etcd)->Get(key)->kvs[0].create_revision;
  } else {
    epoch = cur->kvs[0].create_revision;
  }
  if (deltas) WriteDeltas(etcd->get(), job, epoch, dir);
  JobConfig cfg;
  cfg.pservers = 1;
  cfg.slots = 16;
  cfg.block_size = 1 << 16;
  ShardStore store(0, cfg, SlotMap::RoundRobin(cfg.slots, 1));
  ParamDecl w{"w", false, floats, 0, OptimizerConfig{}, {}};
  ParamDecl e{"emb", true, 0, 8, OptimizerConfig{}, InitializerConfig{}};
  if (!store.Declare(w).ok() || !store.Declare(e).ok()) return 2;
  Checkpointer ck(etcd->get(), job, 0, epoch, dir);
  // Start after whatever was recorded, so versions only grow across runs.
  int64_t v = 0;
  if (auto latest = ck.LoadLatest(); latest.ok() && *latest) v = (*latest)->version;
  std::vector<uint64_t> keys(64);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 7;
  while (true) {
    ++v;
    ShardSnapshot snap = store.Snapshot();
    for (auto& b : snap.dense) std::fill(b.data.begin(), b.data.end(), static_cast<float>(v));
    snap.sparse[0].keys = keys;
    snap.sparse[0].t.assign(keys.size(), v);
    snap.sparse[0].arena.assign(keys.size() * 8, static_cast<float>(v));
    Saved(ck.Save(Checkpoint{job, 0, v, v, snap}), v);
  }
}
