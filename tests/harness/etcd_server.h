// EtcdServer: a real etcd (Debian's etcd-server) for tests, on free loopback ports with its data
// in a fresh temp dir. It is ended by PID in the destructor (also when a test fails) and its
// directory removed. Stop()/Start() restart it on the same ports and data dir. Test-only.
#pragma once

#include <memory>
#include <string>

#include "harness/subprocess.h"
#include "tessera/status.h"

namespace tessera::testing {

struct EtcdServerOptions {
  // Serve clients over TLS with a CA and certificate made for this server (openssl CLI); the CA
  // file is ca_file().
  bool tls = false;
  // More flags (e.g. spec::EtcdServerFlags(), what the etcd a job starts runs with).
  std::vector<std::string> flags;
};

class EtcdServer {
 public:
  // Starts etcd and waits until it answers (up to 30 s).
  static StatusOr<std::unique_ptr<EtcdServer>> Launch(EtcdServerOptions options = {});
  ~EtcdServer();

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& dir() const { return dir_; }
  std::string ca_file() const { return dir_ + "/ca.pem"; }
  pid_t pid() const { return proc_ ? proc_->pid() : -1; }

  // Graceful stop (SIGTERM) and restart with the same ports and data.
  Status Stop();
  Status Kill();  // SIGKILL
  Status Start();
  bool running() const;

 private:
  EtcdServer() = default;
  Status MakeCertificates();
  EtcdServerOptions options_;
  std::string dir_;
  std::string data_dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  int starts_ = 0;
  std::unique_ptr<Subprocess> proc_;
};

}  // namespace tessera::testing
