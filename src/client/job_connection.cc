// ConnectJob (see job_connection.h).
#include "client/job_connection.h"

#include "coord/connection.h"
#include "job/job_store.h"

namespace tessera {

StatusOr<JobConnection> ConnectJob(const ConnectionOptions& options,
                                   std::chrono::milliseconds connect_timeout) {
  TESSERA_RETURN_IF_ERROR(options.Validate());
  JobConnection c;
  TESSERA_ASSIGN_OR_RETURN(etcd::EtcdOptions eo, EtcdOptionsFor(options));
  TESSERA_ASSIGN_OR_RETURN(c.etcd, etcd::EtcdClient::Create(eo));
  TESSERA_RETURN_IF_ERROR(c.etcd->CheckReachable(connect_timeout));
  TESSERA_ASSIGN_OR_RETURN(c.config, LoadJobConfig(c.etcd.get(), options.job));
  TESSERA_ASSIGN_OR_RETURN(c.secret, LoadJobSecret(c.etcd.get(), options.job, c.config, options.secret_file));
  TESSERA_ASSIGN_OR_RETURN(c.tls, LoadJobTls(options.job, c.config, options.tls_ca_file,
                                             options.tls_cert_file, options.tls_key_file));
  return c;
}

}  // namespace tessera
