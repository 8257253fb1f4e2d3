// Process: a child process ended by PID, together with everything it started. Its stdout and
// stderr go to a log file (appended). It gets SIGKILL if its parent dies (PR_SET_PDEATHSIG);
// since that signal follows the *thread* that forked, every child is forked from one long-lived
// spawner thread.
//
// Process groups: a child runs in a process group of its own (unless told otherwise), and every
// signal goes to the whole group, so a `/bin/sh -c` command line and the programs it starts stop
// together. When the child (the group's leader) exits, whatever it left running in its group is
// killed (SIGKILL) before the child is reaped, except during a Stop() grace period, when they may
// finish on their own. The destructor kills a group that is still running.
//
// Control groups: where the caller gives a Cgroup (ProcessOptions::cgroup_parent), the child also
// runs in a control group of its own below it, joined before it runs anything. The kernel keeps
// there whatever it starts, a daemon that left the process group with setsid() included, so
// signals, the kill at the child's end and the destructor's reach those too. The group is removed
// once everything in it is gone.
// Used by `tessera local` (its supervised processes) and by tests. Not thread-safe (one owner).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera {

class Cgroup;  // common/cgroup.h

struct ProcessOptions {
  std::vector<std::string> argv;           // argv[0] is the program path
  std::map<std::string, std::string> env;  // added to (or replacing in) the parent's environment
  std::string log_path;                    // stdout+stderr, appended; empty: /dev/null
  bool inherit_output = false;             // stdout+stderr are the parent's (log_path unused)
  // stdin is a pipe the parent holds open until CloseStdin() or the parent's end: the child
  // sees its stdin end when the parent goes, however it goes. Otherwise stdin is /dev/null.
  bool stdin_pipe = false;
  std::string cwd;                         // working directory; empty: the parent's
  // The child leads a process group of its own: a terminal's Ctrl-C reaches only the parent,
  // and signals reach everything the child started.
  bool new_process_group = true;
  // A control group the child gets a group of its own below (see above); it must outlive the
  // Process. nullptr: process groups alone.
  const Cgroup* cgroup_parent = nullptr;
};

// A signal's disposition as the kernel's rt_sigaction takes it (SIG_DFL when zeroed).
struct RawSignalAction {
  void (*handler)(int) = SIG_DFL;
  unsigned long flags = 0;
  void (*restorer)() = nullptr;
  uint64_t mask = 0;
};
// rt_sigaction without glibc's filter, so it reaches every signal number, the two glibc reserves
// for itself (32, 33) included. Async-signal-safe. Returns 0, or -1 with errno.
int RawSigaction(int sig, const RawSignalAction* action, RawSignalAction* old);

// The path of program `name`: itself when it holds a '/', else the first executable of that name
// in $PATH. NotFound, naming it, when there is none.
StatusOr<std::string> FindProgram(const std::string& name);

class Process {
 public:
  static StatusOr<std::unique_ptr<Process>> Spawn(ProcessOptions options);
  ~Process();  // SIGKILL and reap if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Whether the child runs (during a Stop() grace period: or anything of its group). Reaps it
  // once it has exited, after killing what it left in its group; escalates a Stop() whose grace
  // period is over to SIGKILL.
  bool running();
  // Sends `sig` to the child's process group (to the child alone without one).
  Status Signal(int sig);
  // SIGKILL to the group, then reap (waits up to 30 s for a child that cannot die at once, e.g.
  // one in uninterruptible sleep).
  void Kill();
  // SIGKILL to the group without waiting; running() reaps it later.
  void KillNoWait();
  // SIGTERM to the group; once `grace` has passed, running() sends SIGKILL to whatever is left.
  // Does not wait.
  void Stop(std::chrono::milliseconds grace);
  // Whether Stop() was called.
  bool stopping() const { return stop_deadline_.has_value(); }
  // Stop(grace), then waits until the group is gone. Returns the exit status if the child exited
  // within the grace period.
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
  // Closes the parent's end of a stdin_pipe: the child reads the end of its input.
  void CloseStdin();

 private:
  explicit Process(ProcessOptions options);
  // Signals the group (or the child alone) and its control group; false if nothing was there to
  // signal.
  bool SignalGroup(int sig);
  // Whether anything but the child itself is left in its process group or control group.
  bool OthersLeft() const;
  // Kills what is left in its control group and removes it (once empty).
  void EndCgroup();
  ProcessOptions options_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::optional<std::chrono::steady_clock::time_point> stop_deadline_;
  bool escalated_ = false;  // SIGKILL sent after the grace period
  std::unique_ptr<Cgroup> cgroup_;  // the child's own, below options_.cgroup_parent
  int stdin_fd_ = -1;       // the parent's end of a stdin_pipe
};

}  // namespace tessera
