// `tessera local scale`: writes the wanted number of trainers to the etcd key the supervisor of
// a running `tessera local` watches (see supervisor.h).
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "local/supervisor.h"

namespace tessera::local {

Status ScaleTrainers(const std::string& run_dir, int trainers) {
  if (trainers < 0 || trainers > 1000) return Status::InvalidArgument("--trainers must be 0..1000");
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(run_dir + "/run.json"));
  auto run = nlohmann::json::parse(text, nullptr, false);
  if (run.is_discarded() || !run.contains("etcd") || !run.contains("job")) {
    return Status::DataLoss(run_dir + "/run.json is not readable");
  }
  etcd::EtcdOptions eo;
  eo.endpoints = {run["etcd"].get<std::string>()};
  eo.retry_timeout = std::chrono::seconds(5);
  TESSERA_ASSIGN_OR_RETURN(auto etcd, etcd::EtcdClient::Create(eo));
  return etcd->Put(keys::LocalTrainers(run["job"].get<std::string>()), std::to_string(trainers))
      .status()
      .WithContext("is the run still going? (etcd " + eo.endpoints[0] + ")");
}

}  // namespace tessera::local
