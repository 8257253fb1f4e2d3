// A bench's cluster: its own etcd, jobs created in it (with a secret, as any job), and the
// `tessera pserver` processes of the current one, ended by PID when the next starts or the
// Cluster goes; and a trainer client connected to a job. Bench-only (ps_bench, step_timeline).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench_etcd.h"
#include "bench_tls.h"
#include "common/random.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "harness/etcd_server.h"
#include "harness/subprocess.h"
#include "harness/wait.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "tessera/client.h"

namespace tessera::bench {

// An etcd, the jobs made in it and their `tessera pserver` processes (one job's at a time).
struct Cluster {
  std::unique_ptr<testing::EtcdServer> etcd;
  std::unique_ptr<etcd::EtcdClient> client;
  std::vector<std::unique_ptr<testing::Subprocess>> pservers;
  std::string dir;
  int jobs = 0;
  std::string tls_dir;              // bench_tls.h's certificates
  std::string apply_threads = "0";  // the pservers' --apply-threads
  bool pipeline = true;             // the clients' ClientOptions::pipeline
  int busy_poll_us = 0;             // the pservers' --busy-poll-us and the clients' busy_poll
};

// A job (named like the certificates when `tls`: one TLS job at a time) and its pservers.
// Starts the cluster's etcd and its client.
inline Status LaunchEtcd(Cluster& c) {
  TESSERA_ASSIGN_OR_RETURN(c.etcd, testing::EtcdServer::Launch());
  TESSERA_ASSIGN_OR_RETURN(c.client, EtcdClientOf(c.etcd->endpoint()));
  return Status::OK();
}

// `optimizer`: the job's.
inline StatusOr<std::string> StartJob(Cluster& c, int pservers, const std::string& mode, bool tls = false,
                                      const std::string& optimizer = "sgd:lr=0.0001") {
  std::string job = tls ? std::string(kTlsJob) : "bench" + std::to_string(c.jobs++);
  JobConfig cfg;
  cfg.tls = tls;
  cfg.pservers = pservers;
  cfg.mode = *ConsistencyMode::Parse(mode);
  TESSERA_ASSIGN_OR_RETURN(cfg.optimizer, OptimizerConfig::Parse(optimizer));
  cfg.token = NewUuid();
  // Every message is authenticated with the job's secret, as in any job.
  for (auto& p : c.pservers) p->Terminate(std::chrono::seconds(5));
  c.pservers.clear();
  if (tls) TESSERA_RETURN_IF_ERROR(c.client->Delete(keys::Job(job), true).status());  // the last TLS job
  TESSERA_RETURN_IF_ERROR(
      c.client->Commit(CreateJobTxn(job, &cfg, security::JobSecret::Generate())).status());
  for (int i = 0; i < pservers; ++i) {
    testing::SpawnOptions o;
    o.argv = {testing::BuildPath("src/tessera"),
              "pserver",
              "--etcd",
              c.etcd->endpoint(),
              "--job",
              job,
              "--log-level",
              "warn",
              "--apply-threads",
              c.apply_threads,
              "--busy-poll-us",
              std::to_string(c.busy_poll_us)};
    if (tls) {
      o.argv.insert(o.argv.end(), {"--tls-ca", c.tls_dir + "/ca.pem", "--tls-cert", c.tls_dir + "/node.pem",
                                   "--tls-key", c.tls_dir + "/node.key"});
    }
    o.log_path = c.dir + "/" + job + "-ps" + std::to_string(i) + ".log";
    TESSERA_ASSIGN_OR_RETURN(auto p, testing::Subprocess::Spawn(o));
    c.pservers.push_back(std::move(p));
  }
  Registry reg(c.client.get(), keys::PserverPrefix(job));
  if (!testing::WaitUntil(
          [&] {
            auto l = reg.List();
            return l.ok() && static_cast<int>(l->members.size()) == pservers;
          },
          std::chrono::seconds(30))) {
    return Status::DeadlineExceeded("pservers did not start");
  }
  return job;
}

inline StatusOr<std::unique_ptr<Client>> Connect(Cluster& c, const std::string& job,
                                                 const std::string& transport) {
  ClientOptions o;
  o.connection.etcd_endpoints = {c.etcd->endpoint()};
  o.connection.job = job;
  if (job == kTlsJob) {
    o.connection.tls_ca_file = c.tls_dir + "/ca.pem";
    o.connection.tls_cert_file = c.tls_dir + "/node.pem";
    o.connection.tls_key_file = c.tls_dir + "/node.key";
  }
  o.transport = transport;
  o.pipeline = c.pipeline;
  o.busy_poll = std::chrono::microseconds(c.busy_poll_us);
  return Client::Connect(o);
}

}  // namespace tessera::bench
