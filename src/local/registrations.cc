// Registrations of a job's processes (see registrations.h).
#include "local/registrations.h"

#include <nlohmann/json.hpp>

#include "coord/election.h"
#include "coord/keys.h"
#include "coord/registry.h"

namespace tessera::local {
namespace {

Status AddPids(etcd::EtcdClient* etcd, const std::string& prefix, std::set<int64_t>* out) {
  etcd::GetOptions range;
  range.prefix = true;
  etcd::CallOptions quick;  // a supervisor's loop must not hang on an etcd outage
  quick.retry_timeout = std::chrono::milliseconds(500);
  TESSERA_ASSIGN_OR_RETURN(auto got, etcd->Get(prefix, range, quick));
  for (const auto& m : MembersFromRange(prefix, got).members) {
    auto j = nlohmann::json::parse(m.value, nullptr, false);
    if (j.is_object() && j.contains("pid") && j["pid"].is_number_integer()) out->insert(j["pid"].get<int64_t>());
  }
  return Status::OK();
}

}  // namespace

StatusOr<JobRegistrations> ReadRegistrations(etcd::EtcdClient* etcd, const std::string& job) {
  JobRegistrations r;
  for (const std::string& prefix :
       {keys::PserverPrefix(job), keys::TrainerPrefix(job), keys::MasterElectionPrefix(job)}) {
    TESSERA_RETURN_IF_ERROR(AddPids(etcd, prefix, &r.registered));
  }
  TESSERA_RETURN_IF_ERROR(AddPids(etcd, keys::TrainerLeftPrefix(job), &r.left));
  return r;
}

std::string LeaderConsoleUrl(etcd::EtcdClient* etcd, const std::string& job) {
  auto leader = Election::Leader(etcd, keys::MasterElectionPrefix(job));
  if (!leader.ok() || !leader->has_value()) return "";
  auto j = nlohmann::json::parse((*leader)->value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("console") || !j["console"].is_string()) return "";
  return j["console"].get<std::string>();
}

}  // namespace tessera::local
