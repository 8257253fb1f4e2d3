// The leading master's look at a data set it follows (a job started with --follow): every second
// it reads the manifest again and hands new chunks to the service, and stops following when the
// job's follow/stop key appears in etcd. I/O shell around MasterService::FollowChunks and
// StopFollowing. One thread (the master's ticker).
#pragma once

#include <string>

#include "coord/etcd_client.h"
#include "master/master_service.h"

namespace tessera::master {

class FollowPoll {
 public:
  FollowPoll(etcd::EtcdClient* etcd, std::string job, std::string dataset_dir, MasterService* service)
      : etcd_(etcd), job_(std::move(job)), dir_(std::move(dataset_dir)), service_(service) {}

  // One look: new chunks, then the stop key. Problems are logged once each, not returned: the
  // job goes on with what it has.
  void Poll();

 private:
  etcd::EtcdClient* etcd_;
  std::string job_, dir_;
  MasterService* service_;
  std::string last_problem_;
  bool stopped_ = false;
};

}  // namespace tessera::master
