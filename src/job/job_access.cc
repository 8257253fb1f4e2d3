// Per-job etcd users (see job_access.h).
#include "job/job_access.h"

#include "coord/keys.h"
#include "security/job_secret.h"

namespace tessera {

std::string JobEtcdUserName(const std::string& job) { return "tessera-job-" + job; }

Status CheckEtcdAuthEnabled(const etcd::EtcdOptions& admin_options) {
  etcd::EtcdOptions anonymous = admin_options;
  anonymous.username.clear();
  anonymous.password.clear();
  anonymous.retry_timeout = std::chrono::seconds(5);
  TESSERA_ASSIGN_OR_RETURN(auto probe, etcd::EtcdClient::Create(anonymous));
  auto r = probe->Get(keys::Root() + "auth-probe");
  if (r.ok()) {
    return Status::FailedPrecondition(
        "etcd at " + probe->endpoints() +
        " answers anyone: its authentication is off, so a per-job user would protect nothing (enable it: "
        "etcdctl user add root; etcdctl auth enable)");
  }
  if (r.status().code() == StatusCode::kPermissionDenied ||
      r.status().code() == StatusCode::kUnauthenticated ||
      r.status().code() == StatusCode::kInvalidArgument) {
    return Status::OK();  // refused without credentials: authentication is on
  }
  return r.status();
}

StatusOr<JobEtcdUser> CreateJobEtcdUser(etcd::EtcdClient* admin, const std::string& job) {
  JobEtcdUser u;
  u.user = JobEtcdUserName(job);
  u.password = security::JobSecret::Generate().Text().substr(0, 32);
  Status role = admin->RoleAdd(u.user);
  if (!role.ok() && role.code() != StatusCode::kAlreadyExists &&
      role.code() != StatusCode::kFailedPrecondition) {
    return role.WithContext("creating job '" + job + "'s etcd role");
  }
  TESSERA_RETURN_IF_ERROR(
      admin->RoleGrantPrefix(u.user, keys::Job(job)).WithContext("granting job '" + job + "'s keys"));
  TESSERA_RETURN_IF_ERROR(
      admin->UserAdd(u.user, u.password).WithContext("creating job '" + job + "'s etcd user"));
  TESSERA_RETURN_IF_ERROR(admin->UserGrantRole(u.user, u.user));
  return u;
}

Status DeleteJobEtcdUser(etcd::EtcdClient* admin, const std::string& job) {
  const std::string name = JobEtcdUserName(job);
  for (Status s : {admin->UserDelete(name), admin->RoleDelete(name)}) {
    if (!s.ok() && s.code() != StatusCode::kNotFound && s.code() != StatusCode::kFailedPrecondition) return s;
  }
  return Status::OK();
}

}  // namespace tessera
