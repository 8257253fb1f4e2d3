// Process: a child process ended by PID. Its stdout and stderr go to a log file (appended). It
// gets SIGKILL if its parent dies (PR_SET_PDEATHSIG); since that signal follows the *thread* that
// forked, every child is forked from one long-lived spawner thread. The destructor kills a child
// that is still running. Used by `tessera local` (its supervised processes) and by tests.
// Not thread-safe (one owner).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera {

struct ProcessOptions {
  std::vector<std::string> argv;           // argv[0] is the program path
  std::map<std::string, std::string> env;  // added to (or replacing in) the parent's environment
  std::string log_path;                    // stdout+stderr, appended; empty: /dev/null
  std::string cwd;                         // working directory; empty: the parent's
  bool new_process_group = true;           // so a terminal's Ctrl-C reaches only the parent
};

class Process {
 public:
  static StatusOr<std::unique_ptr<Process>> Spawn(ProcessOptions options);
  ~Process();  // SIGKILL and reap if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  Status Signal(int sig);
  // SIGKILL, then reap.
  void Kill();
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status if it exited by itself.
  std::optional<int> Terminate(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Waits for exit; returns the exit code (128+signal if killed), or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // The exit code once it has exited.
  std::optional<int> exit_code() const { return exit_code_; }
  // The log so far.
  std::string Output() const;
  // Waits until the log contains `text`; returns whether it did within `timeout`.
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout);
  const std::string& log_path() const { return options_.log_path; }

 private:
  explicit Process(ProcessOptions options) : options_(std::move(options)) {}
  ProcessOptions options_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

}  // namespace tessera
