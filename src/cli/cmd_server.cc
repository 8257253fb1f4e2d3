// `tessera server`: the training platform's API server (accounts so far; see src/server).
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "server/api_server.h"
#include "server/database.h"
#include "server/schema.h"

namespace tessera::cli {
namespace {

struct ServerFlags {
  std::string data_dir;
  std::string database;
  std::string listen = "127.0.0.1";
  int port = 8780;
  bool require_approval = false;
};

int RunServer(const ServerFlags& f) {
  std::atomic<bool> stop{false};
  SignalWatcher signals([&](int) { stop = true; });
  if (f.data_dir.empty())
    return Fail("server", Status::InvalidArgument("give --data-dir DIR: the server keeps its files there (and its "
                                                  "SQLite database, unless --database names a PostgreSQL)"));
  const std::string data_dir = std::filesystem::absolute(f.data_dir).lexically_normal().string();
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return Fail("server", Status::Unavailable("cannot create --data-dir " + data_dir + ": " + ec.message()));
  std::string where = f.database;
  if (where.empty()) where = data_dir + "/server.db";
  auto db = server::OpenDatabase(where);
  if (!db.ok()) return Fail("server", db.status());
  if (Status s = server::Migrate(**db, server::ServerSchema()); !s.ok()) return Fail("server", s);
  server::ServerOptions so;
  so.accounts.require_approval = f.require_approval;
  so.data_dir = data_dir;
  server::ApiServer api(db->get(), so);
  if (Status s = api.Start(f.listen, f.port); !s.ok()) return Fail("server", s);
  std::printf("tessera server: API at http://%s:%d/api/v1 (state: %s %s)\n", f.listen.c_str(), api.port(),
              (*db)->Kind().c_str(), (*db)->Kind() == "sqlite" ? where.c_str() : "database");
  std::fflush(stdout);
  while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  api.Stop();
  return 0;
}

}  // namespace

void RegisterServer(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ServerFlags>();
  auto* cmd = app.add_subcommand(
      "server",
      "Run the training platform's API server: accounts, namespaces and roles, API tokens and an\n"
      "audit log (docs/platform-api.md), its state in SQLite under --data-dir or in PostgreSQL\n"
      "(--database postgresql://...). The first user to sign up administers the server.");
  cmd->add_option("--data-dir", f->data_dir, "directory of the server's files: data sets, uploads, code, jobs (and\nits SQLite database, DIR/server.db)")->required();
  cmd->add_option("--database", f->database, "a PostgreSQL URL instead of SQLite, e.g. postgresql://user@host/db");
  cmd->add_option("--listen", f->listen, "address to serve on")->capture_default_str();
  cmd->add_option("--port", f->port, "port (0: any free port, printed)")->capture_default_str();
  cmd->add_flag("--require-approval", f->require_approval, "new users wait for an administrator's approval");
  cmd->callback([f, exit_code] { *exit_code = RunServer(*f); });
}

}  // namespace tessera::cli
