// ApiServer: the platform's JSON REST API over HTTP (docs/platform-api.md). This first part
// serves accounts: sign-up, login, the caller, API tokens, approval, namespace members, the audit
// log. Every request but sign-up and login carries `Authorization: Bearer <token>`; every
// endpoint checks the caller's permission (authz.h) and writes what was done to the audit log.
// Errors are `{"error": {"code": ..., "message": ...}}` with the matching HTTP status; bodies
// above 1 MiB are refused before they are read; unknown fields are refused. Thread-safety:
// Start/Stop from one thread; requests are served on the server's threads.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "server/accounts.h"
#include "server/database.h"

namespace httplib {
class Server;
}

namespace tessera::server {

class ApiServer {
 public:
  ApiServer(Database* db, AccountOptions accounts);
  ~ApiServer();

  // Binds host:port (0: any free port) and serves in the background.
  Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }

 private:
  void Routes();
  Database* db_;
  Accounts accounts_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

// The HTTP status for a Status code (400, 401, 403, 404, 409, 413, 500, 503, ...).
int HttpStatusOf(const Status& s);

}  // namespace tessera::server
