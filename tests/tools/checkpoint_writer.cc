// checkpoint_writer: saves checkpoints of a synthetic shard in a loop, as fast as it can, for the
// crash test (tests/ps/checkpoint_crash_test.cc kills it at random moments). Version v's shard
// has every dense value equal to v and every sparse row filled with v, so a reader can tell a
// whole checkpoint from a mixed one. It holds pserver index 0 of the job with a plain key (no
// lease), created once and reused, so its records pass the checkpointer's fence.
// Prints "SAVED <version>" after each recorded checkpoint. Test-only.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "job/slot_map.h"
#include "pserver/checkpointer.h"

using namespace tessera;

int main(int argc, char** argv) {
  CLI::App app{"checkpoint crash-test writer"};
  std::string etcd_ep, job = "crash", dir;
  int64_t floats = 1 << 20;
  app.add_option("--etcd", etcd_ep)->required();
  app.add_option("--job", job);
  app.add_option("--dir", dir)->required();
  app.add_option("--floats", floats);
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
    auto rec = ck.Save(Checkpoint{job, 0, v, v, snap});
    if (!rec.ok()) {
      std::printf("ERROR %s\n", rec.status().ToString().c_str());
      return 1;
    }
    std::printf("SAVED %lld\n", static_cast<long long>(v));
    std::fflush(stdout);
  }
}
