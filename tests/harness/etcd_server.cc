// EtcdServer (see etcd_server.h).
#include "harness/etcd_server.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/files.h"
#include "coord/etcd_client.h"
#include "harness/ports.h"

namespace tessera::testing {

StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Launch(EtcdServerOptions options) {
  std::unique_ptr<EtcdServer> s(new EtcdServer());
  s->options_ = options;
  TESSERA_ASSIGN_OR_RETURN(s->dir_, MakeTempDir("tessera-etcd-"));
  if (options.tls) TESSERA_RETURN_IF_ERROR(s->MakeCertificates());
  s->data_dir_ = s->dir_ + "/data";
  s->client_port_ = FreePort();
  s->peer_port_ = FreePort();
  while (s->peer_port_ == s->client_port_) s->peer_port_ = FreePort();
  TESSERA_RETURN_IF_ERROR(s->Start());
  return s;
}

EtcdServer::~EtcdServer() {
  if (proc_) proc_->Kill();
  proc_.reset();
  if (!dir_.empty()) (void)RemoveAll(dir_);
}

bool EtcdServer::running() const { return proc_ && proc_->running(); }

Status EtcdServer::MakeCertificates() {
  // A CA, and a server certificate for 127.0.0.1 signed by it.
  std::string d = dir_;
  std::string cmd =
      "cd '" + d +
      "' && "
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=tessera-test-ca -keyout ca-key.pem -out "
      "ca.pem && "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server-key.pem -out server.csr && "
      "printf 'subjectAltName=IP:127.0.0.1\n' > san.ext && "
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 "
      "-extfile san.ext -out server.pem";
  std::string quiet = "(" + cmd + ") >'" + d + "/openssl.log' 2>&1";
  if (std::system(quiet.c_str()) != 0) {
    auto log = ReadFile(d + "/openssl.log");
    return Status::Internal("making test certificates failed: " + (log.ok() ? *log : std::string("?")));
  }
  return Status::OK();
}

Status EtcdServer::Start() {
  if (running()) return Status::FailedPrecondition("etcd is already running");
  std::string scheme = options_.tls ? "https://" : "http://";
  std::string client = scheme + "127.0.0.1:" + std::to_string(client_port_);
  std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  SpawnOptions o;
  o.argv = {"/usr/bin/etcd",
            "--name=test",
            "--data-dir=" + data_dir_,
            "--listen-client-urls=" + client,
            "--advertise-client-urls=" + client,
            "--listen-peer-urls=" + peer,
            "--initial-advertise-peer-urls=" + peer,
            "--initial-cluster=test=" + peer,
            "--initial-cluster-state=new",
            "--logger=zap",
            "--log-level=warn"};
  for (const auto& f : options_.flags) o.argv.push_back(f);
  if (options_.tls) {
    o.argv.push_back("--cert-file=" + dir_ + "/server.pem");
    o.argv.push_back("--key-file=" + dir_ + "/server-key.pem");
  }
  o.log_path = dir_ + "/etcd.log";
  o.env["ETCD_UNSUPPORTED_ARCH"] = "";
  TESSERA_ASSIGN_OR_RETURN(proc_, Subprocess::Spawn(o));
  ++starts_;
  etcd::EtcdOptions eo;
  eo.endpoints = {endpoint()};
  eo.tls = options_.tls;
  if (options_.tls) eo.ca_file = ca_file();
  TESSERA_ASSIGN_OR_RETURN(auto client_conn, etcd::EtcdClient::Create(eo));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!proc_->running()) {
      return Status::Internal("etcd exited during start-up; its log: " + proc_->Output());
    }
    auto ping = client_conn->Ping(std::chrono::milliseconds(500));
    if (ping.ok()) return Status::OK();
  }
  return Status::DeadlineExceeded("etcd did not answer within 30 s; its log: " + proc_->Output());
}

Status EtcdServer::Stop() {
  if (!running()) return Status::FailedPrecondition("etcd is not running");
  proc_->Terminate(std::chrono::seconds(10));
  return Status::OK();
}

Status EtcdServer::Kill() {
  if (!running()) return Status::FailedPrecondition("etcd is not running");
  proc_->Kill();
  return Status::OK();
}

}  // namespace tessera::testing
