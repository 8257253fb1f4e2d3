// LocalBackend: runs each job on the server's own machine as one `tessera local` process (the
// supervisor that restarts crashed processes), started in a session of its own so that it
// outlives the server: a server killed and started again finds it by its pid (checked against
// its command line, so a reused pid is not mistaken for it) and reads how it ended from its run
// directory (result.json is written only by a job that completed). Its output goes to
// <dir>/supervisor.log, each process's to <dir>/run/logs/. Thread-safe.
#pragma once

#include <mutex>
#include <set>

#include "server/backend.h"

namespace tessera::server {

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(std::string tessera_bin) : bin_(std::move(tessera_bin)) {}
  std::string Name() const override { return "local"; }
  StatusOr<std::string> Start(const JobLaunch& job) override;
  JobObservation Observe(const std::string& dir, const std::string& handle) override;
  Status Scale(const std::string& dir, const std::string& handle, int trainers) override;
  Status Stop(const std::string& dir, const std::string& handle, bool force) override;
  std::vector<std::pair<std::string, std::string>> Logs(const std::string& dir) override;
  std::string HistoryPath(const std::string& dir) override { return dir + "/run/history.jsonl"; }

  // The `tessera local` command line for a job (pure).
  static std::vector<std::string> Argv(const std::string& bin, const JobLaunch& job);

 private:
  bool Alive(const std::string& dir, int pid);
  std::string bin_;
  std::mutex mu_;
  std::set<int> children_;  // started by this server: reaped here
};

}  // namespace tessera::server
