// SignalWatcher (see signals.h).
#include "cli/signals.h"

#include <ctime>

namespace tessera::cli {

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal) : on_signal_(std::move(on_signal)) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this, set] {
    while (!done_) {
      timespec ts{0, 200 * 1000 * 1000};
      int sig = sigtimedwait(&set, nullptr, &ts);
      if (sig > 0) {
        received_ = sig;
        on_signal_(sig);
      }
    }
  });
}

SignalWatcher::~SignalWatcher() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::cli
