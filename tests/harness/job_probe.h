// Looking at a running job from outside, for tests and benches: the pid a registered member
// (pservers/<i>, trainers/<id>) wrote into its key, whether a replicated job has all its copies,
// and the job's master status.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "client/master_client.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/replica_map.h"

namespace tessera::testing {

// The pid in member `name`'s registration under `prefix`; 0 if it is not registered.
inline int64_t RegisteredPid(etcd::EtcdClient* etcd, const std::string& prefix, const std::string& name) {
  auto l = Registry(etcd, prefix).List();
  if (!l.ok()) return 0;
  const Member* m = l->Find(name);
  if (!m) return 0;
  auto j = nlohmann::json::parse(m->value, nullptr, false);
  return j.is_discarded() ? 0 : j.value("pid", int64_t{0});
}

// A job with replicas: whether every shard has all its copies (the replica map says so).
inline bool FullyReplicated(etcd::EtcdClient* etcd, const std::string& job) {
  auto kv = etcd->Get(keys::ReplicaMap(job));
  if (!kv.ok() || kv->kvs.empty()) return false;
  auto m = ReplicaMap::FromJson(kv->kvs[0].value);
  return m.ok() && m->UnderReplicated().empty();
}

// The job's master status; an empty reply while no master answers.
inline master::StatusReply MasterStatusOf(etcd::EtcdClient* etcd, const std::string& job) {
  auto cfg = etcd->Get(keys::Config(job));
  if (!cfg.ok() || cfg->kvs.empty()) return {};
  auto jc = JobConfig::FromJson(cfg->kvs[0].value);
  if (!jc.ok()) return {};
  auto secret = LoadJobSecret(etcd, job, *jc);
  if (!secret.ok()) return {};
  master::MasterClient mc(etcd, job, jc->token, *secret);
  return mc.GetStatus(Deadline(std::chrono::seconds(2))).value_or(master::StatusReply());
}

}  // namespace tessera::testing
