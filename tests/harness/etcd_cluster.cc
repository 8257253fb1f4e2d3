// EtcdCluster (see etcd_cluster.h).
#include "harness/etcd_cluster.h"

#include <chrono>
#include <set>

#include "common/files.h"
#include "common/strings.h"
#include "coord/etcd_client.h"
#include "harness/ports.h"

namespace tessera::testing {

StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Launch(EtcdClusterOptions options) {
  if (options.members < 1) return Status::InvalidArgument("an etcd cluster needs at least one member");
  std::unique_ptr<EtcdCluster> c(new EtcdCluster());
  TESSERA_ASSIGN_OR_RETURN(c->dir_, MakeTempDir("tessera-etcd-cluster-"));
  std::set<int> used;
  auto fresh_port = [&] {
    int p = FreePort();
    // Bounded: free ports are many; a repeat is drawn again.
    for (int tries = 0; used.count(p) && tries < 100; ++tries) p = FreePort();
    used.insert(p);
    return p;
  };
  std::vector<int> peer_ports;
  std::vector<std::string> peers;
  for (int i = 0; i < options.members; ++i) {
    c->client_ports_.push_back(fresh_port());
    peer_ports.push_back(fresh_port());
    peers.push_back("m" + std::to_string(i) + "=http://127.0.0.1:" + std::to_string(peer_ports.back()));
  }
  for (int i = 0; i < options.members; ++i) {
    const std::string client = "http://127.0.0.1:" + std::to_string(c->client_ports_[i]);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_ports[i]);
    SpawnOptions o;
    o.argv = {"/usr/bin/etcd",
              "--name=m" + std::to_string(i),
              "--data-dir=" + c->dir_ + "/m" + std::to_string(i),
              "--listen-client-urls=" + client,
              "--advertise-client-urls=" + client,
              "--listen-peer-urls=" + peer,
              "--initial-advertise-peer-urls=" + peer,
              "--initial-cluster=" + Join(peers, ","),
              "--initial-cluster-state=new",
              "--initial-cluster-token=" + c->dir_,
              "--logger=zap",
              "--log-level=warn"};
    for (const auto& f : options.flags) o.argv.push_back(f);
    o.log_path = c->dir_ + "/m" + std::to_string(i) + ".log";
    o.env["ETCD_UNSUPPORTED_ARCH"] = "";
    TESSERA_ASSIGN_OR_RETURN(auto member, Subprocess::Spawn(o));
    c->members_.push_back(std::move(member));
  }
  etcd::EtcdOptions eo;
  eo.endpoints = c->endpoints();
  eo.retry_timeout = std::chrono::seconds(60);
  TESSERA_ASSIGN_OR_RETURN(auto client, etcd::EtcdClient::Create(eo));
  Status wrote = client->Put("/harness/cluster-up", "1").status();
  if (!wrote.ok()) {
    std::string logs;
    for (const auto& m : c->members_) logs += "\n" + m->Output();
    return Status::DeadlineExceeded("the etcd cluster took no write within 60 s: " + wrote.message() + logs);
  }
  return c;
}

EtcdCluster::~EtcdCluster() {
  for (auto& m : members_) m->Kill();
  members_.clear();
  if (!dir_.empty()) (void)RemoveAll(dir_);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int p : client_ports_) out.push_back("127.0.0.1:" + std::to_string(p));
  return out;
}

std::vector<pid_t> EtcdCluster::pids() const {
  std::vector<pid_t> out;
  for (const auto& m : members_) out.push_back(m->pid());
  return out;
}

}  // namespace tessera::testing
