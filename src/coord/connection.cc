// ConnectionOptions (include/tessera/connection.h) and the etcd options they become.
#include "coord/connection.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/files.h"
#include "common/flag_names.h"
#include "common/strings.h"

namespace tessera {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

void Fill(std::string* field, const char* env) {
  if (field->empty()) *field = Env(env);
}

}  // namespace

Status ConnectionOptions::FillFromEnvironment() {
  if (etcd_endpoints.empty()) SetEtcd(Env(flags::kEnvEtcd));
  Fill(&job, flags::kEnvJob);
  Fill(&etcd_username, flags::kEnvEtcdUser);
  Fill(&etcd_password, flags::kEnvEtcdPassword);
  Fill(&etcd_ca_file, flags::kEnvEtcdCa);
  Fill(&etcd_cert_file, flags::kEnvEtcdCert);
  Fill(&etcd_key_file, flags::kEnvEtcdKey);
  Fill(&secret_file, flags::kEnvJobSecretFile);
  Fill(&etcd_credentials_file, flags::kEnvEtcdCredentials);
  Fill(&tls_ca_file, flags::kEnvTlsCa);
  Fill(&tls_cert_file, flags::kEnvTlsCert);
  Fill(&tls_key_file, flags::kEnvTlsKey);
  const std::string tls = Env(flags::kEnvEtcdTls);
  if (!tls.empty()) {
    if (tls == "1" || tls == "true" || tls == "yes") {
      etcd_tls = true;
    } else if (tls != "0" && tls != "false" && tls != "no") {
      return Status::InvalidArgument(std::string(flags::kEnvEtcdTls) + "='" + tls + "' is not 1 or 0");
    }
  }
  return Status::OK();
}

Status ConnectionOptions::Validate() const {
  if (etcd_endpoints.empty()) {
    return Status::InvalidArgument("no etcd endpoint: pass etcd=\"host:port\" or set " +
                                   std::string(flags::kEnvEtcd));
  }
  for (const auto& e : etcd_endpoints) TESSERA_RETURN_IF_ERROR(ParseEndpoints(e).status());
  if (job.empty())
    return Status::InvalidArgument("no job: pass job=\"NAME\" or set " + std::string(flags::kEnvJob));
  TESSERA_RETURN_IF_ERROR(ValidateName(job, "job"));
  if (etcd_cert_file.empty() != etcd_key_file.empty()) {
    return Status::InvalidArgument("an etcd client certificate needs its key, and a key its certificate (" +
                                   std::string(flags::kEnvEtcdCert) + ", " + flags::kEnvEtcdKey + ")");
  }
  if (!etcd_credentials_file.empty() && !etcd_username.empty()) {
    return Status::InvalidArgument("an etcd user and an etcd credentials file: give one or the other");
  }
  if (!etcd_password.empty() && etcd_username.empty()) {
    return Status::InvalidArgument("an etcd password without a user (" + std::string(flags::kEnvEtcdUser) +
                                   ")");
  }
  return Status::OK();
}

void ConnectionOptions::SetEtcd(const std::string& comma_separated) {
  etcd_endpoints.clear();
  for (auto& e : Split(comma_separated, ',')) {
    if (!e.empty()) etcd_endpoints.push_back(std::string(e));
  }
}

std::string ConnectionOptions::EtcdText() const { return Join(etcd_endpoints, ","); }

Status WriteEtcdCredentials(const std::string& path, const JobEtcdUser& u) {
  return WriteFileAtomic(path, "user=" + u.user + "\npassword=" + u.password + "\n", 0600);
}

StatusOr<JobEtcdUser> ReadEtcdCredentials(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound("cannot read the etcd credentials file " + path + ": " + std::strerror(errno));
  }
  if (OthersMayRead(st)) {
    return Status::PermissionDenied("the etcd credentials file " + path +
                                    " may be read by others (chmod 600 " + path + ")");
  }
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  JobEtcdUser u;
  for (const std::string& raw : Split(text, '\n')) {
    const std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("the etcd credentials file " + path + " has a line without '='");
    }
    const std::string_view k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "user") {
      u.user = std::string(v);
    } else if (k == "password") {
      u.password = std::string(v);
    } else {
      return Status::InvalidArgument("the etcd credentials file " + path + " has an unknown field '" +
                                     std::string(k) + "' (user, password)");
    }
  }
  if (u.user.empty() || u.password.empty()) {
    return Status::InvalidArgument("the etcd credentials file " + path + " needs both user= and password=");
  }
  return u;
}

StatusOr<etcd::EtcdOptions> EtcdOptionsFor(const ConnectionOptions& c) {
  etcd::EtcdOptions o;
  o.endpoints = c.etcd_endpoints;
  o.username = c.etcd_username;
  o.password = c.etcd_password;
  if (!c.etcd_credentials_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(JobEtcdUser u, ReadEtcdCredentials(c.etcd_credentials_file));
    o.username = u.user;
    o.password = u.password;
  }
  o.tls = c.etcd_tls || !c.etcd_ca_file.empty() || !c.etcd_cert_file.empty();
  o.ca_file = c.etcd_ca_file;
  o.cert_file = c.etcd_cert_file;
  o.key_file = c.etcd_key_file;
  return o;
}

}  // namespace tessera
