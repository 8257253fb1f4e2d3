// SpinGovernor: whether busy polling (SpinUntilReadable) spins before its next wait, from what its
// last spins saw. Polling pays only where a core would otherwise sit idle; two signs say it does
// not:
//  - the spinner lost its core: between two of its checks more than kLostCore passed, so another
//    thread ran there instead (a yield gave it the core, or the machine took the core away: a
//    VM's host, or a CPU quota that stops the whole group once the spinning has used it up, for
//    the rest of the period: a 1x1 job in a one-core quota ran at 58% of its sleeping speed,
//    bench/README.md "CPU quotas");
//  - the spins keep running out: the message comes later than the spin lasts (the peer is slow,
//    or waits for others), so each spin is a core's time for nothing.
// Either makes the next waits sleep at once: first kFirstBackOff waits, twice as many each time
// it happens again (up to kMaxBackOff), and half as many again after kForgiveAfter spins in a row
// that went well (a contended core keeps its long back-offs).
// Counted in waits, not time: pure, no clock. Not thread-safe (SpinUntilReadable's one poller
// at a time holds it).
#pragma once

#include <chrono>
#include <cstdint>

namespace tessera {

struct SpinOutcome {
  std::chrono::microseconds longest_gap{0};  // the longest time between two checks
  bool arrived = false;                      // the message came while spinning
  bool ran_out = false;                      // the spin lasted its whole budget without it
};

class SpinGovernor {
 public:
  static constexpr std::chrono::microseconds kLostCore{500};
  static constexpr int kRunOutsInARow = 16;
  static constexpr int kFirstBackOff = 64;
  static constexpr int kMaxBackOff = 16384;
  static constexpr int kForgiveAfter = 256;

  // Whether the next wait may spin; a wait that may not counts toward the back-off's end.
  bool MaySpin();
  void Record(const SpinOutcome& outcome);

  int next_back_off() const { return next_; }
  int64_t back_offs() const { return back_offs_; }

 private:
  void BackOff();

  int left_ = 0;
  int next_ = kFirstBackOff;
  int run_outs_ = 0;
  int good_ = 0;  // spins in a row that went well
  int64_t back_offs_ = 0;
};

}  // namespace tessera
