// Reading a job from etcd (see job_store.h).
#include "job/job_store.h"

#include "coord/keys.h"

namespace tessera {

StatusOr<JobConfig> LoadJobConfig(etcd::EtcdClient* etcd, const std::string& job) {
  TESSERA_ASSIGN_OR_RETURN(auto kv, etcd->Get(keys::Config(job)));
  if (kv.kvs.empty()) {
    return Status::NotFound("job '" + job + "' does not exist in etcd at " + etcd->endpoints() +
                            " (create it with `tessera job create`)");
  }
  return JobConfig::FromJson(kv.kvs[0].value);
}

StatusOr<SlotMap> LoadSlotMap(etcd::EtcdClient* etcd, const std::string& job) {
  TESSERA_ASSIGN_OR_RETURN(auto kv, etcd->Get(keys::SlotMap(job)));
  if (kv.kvs.empty()) return Status::DataLoss("job '" + job + "' has a configuration but no slot map");
  return SlotMap::FromJson(kv.kvs[0].value);
}

}  // namespace tessera
