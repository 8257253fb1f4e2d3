// Reading a job's configuration and slot map from etcd, with the errors every reader should
// give: NotFound naming the job and the etcd endpoints for a job that does not exist, DataLoss
// for one without a slot map. Used by the pserver, master, client, reader, exporter and session.
#pragma once

#include <string>

#include "coord/etcd_client.h"
#include "job/job_config.h"
#include "job/slot_map.h"

namespace tessera {

StatusOr<JobConfig> LoadJobConfig(etcd::EtcdClient* etcd, const std::string& job);
StatusOr<SlotMap> LoadSlotMap(etcd::EtcdClient* etcd, const std::string& job);

}  // namespace tessera
