// Registrations of a job's processes (see registrations.h).
#include "supervise/registrations.h"

#include <nlohmann/json.hpp>

#include "coord/election.h"
#include "coord/keys.h"
#include "coord/registry.h"

namespace tessera::supervise {
namespace {

// A supervisor's loop must not hang on an etcd outage.
etcd::CallOptions Quick() {
  etcd::CallOptions quick;
  quick.retry_timeout = std::chrono::milliseconds(500);
  return quick;
}

// The pid a registration's value names (0: none).
int64_t PidOf(const std::string& value) {
  auto j = nlohmann::json::parse(value, nullptr, false);
  return j.is_object() && j.contains("pid") && j["pid"].is_number_integer() ? j["pid"].get<int64_t>() : 0;
}

Status AddPids(etcd::EtcdClient* etcd, const std::string& prefix, std::set<int64_t>* out) {
  etcd::GetOptions range;
  range.prefix = true;
  TESSERA_ASSIGN_OR_RETURN(auto got, etcd->Get(prefix, range, Quick()));
  for (const auto& m : MembersFromRange(prefix, got).members) {
    if (int64_t pid = PidOf(m.value); pid != 0) out->insert(pid);
  }
  return Status::OK();
}

std::vector<std::string> LiveRegistrationPrefixes(const std::string& job) {
  return {keys::PserverPrefix(job), keys::PserverHostPrefix(job), keys::TrainerPrefix(job),
          keys::MasterElectionPrefix(job)};
}

}  // namespace

StatusOr<JobRegistrations> ReadRegistrations(etcd::EtcdClient* etcd, const std::string& job) {
  JobRegistrations r;
  for (const std::string& prefix : LiveRegistrationPrefixes(job)) {
    TESSERA_RETURN_IF_ERROR(AddPids(etcd, prefix, &r.registered));
  }
  TESSERA_RETURN_IF_ERROR(AddPids(etcd, keys::TrainerLeftPrefix(job), &r.left));
  return r;
}

StatusOr<int> RevokeLeasesOf(etcd::EtcdClient* etcd, const std::string& job, int64_t pid) {
  std::set<int64_t> leases;
  etcd::GetOptions range;
  range.prefix = true;
  for (const std::string& prefix : LiveRegistrationPrefixes(job)) {
    TESSERA_ASSIGN_OR_RETURN(auto got, etcd->Get(prefix, range, Quick()));
    for (const auto& kv : got.kvs) {
      if (kv.lease != 0 && PidOf(kv.value) == pid) leases.insert(kv.lease);
    }
  }
  int revoked = 0;
  for (int64_t lease : leases) {
    Status s = etcd->RevokeLease(lease, Quick());
    if (s.ok())
      ++revoked;
    else if (s.code() != StatusCode::kNotFound)
      return s.WithContext("revoking lease " + std::to_string(lease));
  }
  return revoked;
}

std::string LeaderConsoleUrl(etcd::EtcdClient* etcd, const std::string& job) {
  auto leader = Election::Leader(etcd, keys::MasterElectionPrefix(job));
  if (!leader.ok() || !leader->has_value()) return "";
  auto j = nlohmann::json::parse((*leader)->value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("console") || !j["console"].is_string()) return "";
  return j["console"].get<std::string>();
}

}  // namespace tessera::supervise
