// Subprocess: a child process for tests, ended by PID. Its stdout and stderr go to a log file the
// test can wait on. The child gets SIGKILL if the test process dies (PR_SET_PDEATHSIG), and the
// destructor kills it, so no process outlives its test, even on failure. Test-only; not
// thread-safe (one owner).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::testing {

struct SpawnOptions {
  std::vector<std::string> argv;           // argv[0] is the program path
  std::map<std::string, std::string> env;  // added to (or replacing in) the parent's environment
  std::string log_path;                    // stdout+stderr; empty: /dev/null
  std::string cwd;                         // working directory; empty: the parent's
};

class Subprocess {
 public:
  static StatusOr<std::unique_ptr<Subprocess>> Spawn(SpawnOptions options);
  ~Subprocess();  // SIGKILL and reap if still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  Status Signal(int sig);
  // SIGKILL, then reap.
  void Kill();
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status if it exited by itself.
  std::optional<int> Terminate(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Waits for exit; returns the exit code (128+signal if killed), or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // The log so far.
  std::string Output() const;
  // Waits until the log contains `text`; returns whether it did within `timeout`.
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout);
  const std::string& log_path() const { return options_.log_path; }

 private:
  explicit Subprocess(SpawnOptions options) : options_(std::move(options)) {}
  SpawnOptions options_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// The path of a binary built by this build tree (TESSERA_BUILD_DIR), e.g. "src/tessera".
std::string BuildPath(const std::string& relative);

}  // namespace tessera::testing
