// WaitUntil: poll a condition until it holds or a deadline passes (the tests' only way to wait
// for another process or thread; never a bare sleep). Test-only.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace tessera::testing {

inline bool WaitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds poll = std::chrono::milliseconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(poll);
  }
  return cond();
}

inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace tessera::testing
