// A real PostgreSQL for tests: initdb into a temp directory and a postgres server on a free
// loopback port, run as the `postgres` system user (PostgreSQL refuses root). Stopped (process
// group, SIGKILL after a grace period) and its directory removed by the destructor. Start() says
// why not where it cannot run (not root, no postgresql package). Test-only.
#pragma once

#include <glob.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/files.h"
#include "common/net.h"
#include "harness/subprocess.h"
#include "harness/wait.h"

namespace tessera::testing {

class PostgresServer {
 public:
  // nullptr with the reason in *why when PostgreSQL cannot be started here.
  static std::unique_ptr<PostgresServer> Start(std::string* why) {
    if (::geteuid() != 0) {
      *why = "not root (PostgreSQL runs as the postgres user)";
      return nullptr;
    }
    passwd* pw = ::getpwnam("postgres");
    if (!pw) {
      *why = "no postgres user (apt-get install postgresql)";
      return nullptr;
    }
    glob_t g{};
    if (::glob("/usr/lib/postgresql/*/bin/initdb", 0, nullptr, &g) != 0 || g.gl_pathc == 0) {
      ::globfree(&g);
      *why = "no PostgreSQL binaries (apt-get install postgresql)";
      return nullptr;
    }
    const std::string bin = std::filesystem::path(g.gl_pathv[g.gl_pathc - 1]).parent_path().string();
    ::globfree(&g);
    auto dir = MakeTempDir("pg-test-");
    if (!dir.ok()) {
      *why = dir.status().ToString();
      return nullptr;
    }
    std::unique_ptr<PostgresServer> pg(new PostgresServer(*dir));
    if (::chown(dir->c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      *why = "cannot give " + *dir + " to postgres";
      return nullptr;
    }
    const std::vector<std::string> as_postgres = {"/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres",
                                                  "--init-groups"};
    SpawnOptions init;
    init.argv = as_postgres;
    for (const std::string& a : std::vector<std::string>{bin + "/initdb", "-D", *dir + "/data", "-A", "trust", "-U",
                                                         "tessera", "--no-sync", "-E", "UTF8"})
      init.argv.push_back(a);
    init.log_path = "/tmp/" + std::filesystem::path(*dir).filename().string() + "-initdb.log";
    auto p = Subprocess::Spawn(init);
    auto code = p.ok() ? (*p)->Wait(std::chrono::seconds(120)) : std::nullopt;
    if (!code || *code != 0) {
      *why = "initdb failed: " + (p.ok() ? (*p)->Output() : p.status().ToString());
      (void)RemoveAll(init.log_path);
      return nullptr;
    }
    (void)RemoveAll(init.log_path);
    pg->port_ = FreeLoopbackPort();
    SpawnOptions run;
    run.argv = as_postgres;
    for (const std::string& a :
         std::vector<std::string>{bin + "/postgres", "-D", *dir + "/data", "-k", *dir, "-h", "127.0.0.1", "-p",
                                  std::to_string(pg->port_), "-c", "fsync=off", "-c", "synchronous_commit=off"})
      run.argv.push_back(a);
    run.log_path = *dir + "/postgres.log";
    auto server = Subprocess::Spawn(run);
    if (!server.ok()) {
      *why = server.status().ToString();
      return nullptr;
    }
    pg->proc_ = std::move(*server);
    // Accepting TCP is not enough: it answers "starting up" until it says it is ready.
    if (!pg->proc_->WaitForOutput("ready to accept connections", std::chrono::seconds(60))) {
      *why = "postgres did not start: " + pg->proc_->Output();
      return nullptr;
    }
    return pg;
  }

  ~PostgresServer() {
    if (proc_) proc_->Terminate(std::chrono::seconds(10));
    (void)RemoveAll(dir_);
  }

  std::string Url() const { return "postgresql://tessera@127.0.0.1:" + std::to_string(port_) + "/postgres"; }

 private:
  explicit PostgresServer(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  int port_ = 0;
  std::unique_ptr<Subprocess> proc_;
};

}  // namespace tessera::testing
