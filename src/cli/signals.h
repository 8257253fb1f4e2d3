// SignalWatcher: turns SIGTERM and SIGINT into a call of `on_signal` on a dedicated thread, for
// long-running commands (pserver, master, local). Construct it first thing in the command,
// before any other thread exists, so the signals are blocked in every thread and only this
// one receives them. Used only by src/cli.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace tessera::cli {

class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int)> on_signal);
  ~SignalWatcher();  // stops watching (signals stay blocked)
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  // The last signal received, or 0.
  int received() const { return received_.load(); }

 private:
  std::function<void(int)> on_signal_;
  std::atomic<bool> done_{false};
  std::atomic<int> received_{0};
  std::thread thread_;
};

}  // namespace tessera::cli
