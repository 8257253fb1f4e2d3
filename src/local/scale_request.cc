// `tessera local scale`: writes the wanted numbers of trainers and pservers to the etcd keys the
// supervisor of a running `tessera local` watches (see supervisor.h), after checking them
// against the job.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "coord/connection.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "job/job_config.h"
#include "local/supervisor.h"

namespace tessera::local {

Status ScaleLocal(const std::string& run_dir, const ScaleRequest& request) {
  if (!request.trainers && !request.pservers)
    return Status::InvalidArgument("say what to scale: --trainers N and/or --pservers N");
  if (request.trainers && (*request.trainers < 0 || *request.trainers > 1000))
    return Status::InvalidArgument("--trainers must be 0..1000, not " + std::to_string(*request.trainers));
  auto text = ReadFile(run_dir + "/run.json");
  if (!text.ok()) {
    return Status::NotFound(run_dir + " is not the run directory of a `tessera local` (" +
                            text.status().message() + "); give the --run DIR it was started with");
  }
  auto run = nlohmann::json::parse(*text, nullptr, false);
  if (run.is_discarded() || !run.contains("etcd") || !run.contains("job")) {
    return Status::DataLoss(run_dir + "/run.json is not readable");
  }
  const std::string job = run["job"].get<std::string>();
  etcd::EtcdOptions eo;
  eo.endpoints = {run["etcd"].get<std::string>()};
  eo.retry_timeout = std::chrono::seconds(5);
  // A run with --secure-etcd: its job's user (readable by the run's owner only).
  if (std::filesystem::exists(run_dir + "/etcd-credentials")) {
    TESSERA_ASSIGN_OR_RETURN(JobEtcdUser user, ReadEtcdCredentials(run_dir + "/etcd-credentials"));
    eo.username = user.user;
    eo.password = user.password;
  }
  TESSERA_ASSIGN_OR_RETURN(auto etcd, etcd::EtcdClient::Create(eo));
  const std::string gone = "is the run still going? (etcd " + eo.endpoints[0] + ")";
  std::vector<etcd::Op> puts;
  if (request.trainers)
    puts.push_back(etcd::Op::Put(keys::LocalTrainers(job), std::to_string(*request.trainers)));
  if (request.pservers) {
    auto cfg = etcd->Get(keys::Config(job));
    if (!cfg.ok()) return cfg.status().WithContext(gone);
    if (cfg->kvs.empty()) return Status::NotFound("job '" + job + "' is not in etcd any more");
    TESSERA_ASSIGN_OR_RETURN(JobConfig config, JobConfig::FromJson(cfg->kvs[0].value));
    if (config.initial_pservers == 0) {
      return Status::FailedPrecondition(
          "job '" + job + "' is not elastic: its " + std::to_string(config.pservers) +
          " pservers are fixed. Start it with --start-pservers N to add and remove pservers while it runs");
    }
    if (*request.pservers < 1 || *request.pservers > config.pservers) {
      return Status::InvalidArgument("--pservers must be 1.." + std::to_string(config.pservers) +
                                     " (the job's shards), not " + std::to_string(*request.pservers));
    }
    puts.push_back(etcd::Op::Put(keys::LocalPservers(job), std::to_string(*request.pservers)));
  }
  etcd::Txn txn;
  txn.success = std::move(puts);
  return etcd->Commit(txn).status().WithContext(gone);
}

}  // namespace tessera::local
