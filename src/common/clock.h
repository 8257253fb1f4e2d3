// Time for Tessera's I/O shells. Pure classes never read a clock: they take time points as
// event arguments, so tests drive them with any times they like.
#pragma once

#include <chrono>
#include <cstdint>

namespace tessera {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using Millis = std::chrono::milliseconds;

inline TimePoint Now() { return SteadyClock::now(); }

// Milliseconds since the Unix epoch, for timestamps shown to people and stored in etcd.
inline int64_t WallMillis() {
  return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A deadline: "until when may I keep trying".
class Deadline {
 public:
  explicit Deadline(Millis timeout) : at_(Now() + timeout) {}
  static Deadline At(TimePoint t) { return Deadline(t); }
  bool expired() const { return Now() >= at_; }
  Millis remaining() const {
    auto r = std::chrono::duration_cast<Millis>(at_ - Now());
    return r.count() < 0 ? Millis(0) : r;
  }
  TimePoint at() const { return at_; }

 private:
  explicit Deadline(TimePoint t) : at_(t) {}
  TimePoint at_;
};

}  // namespace tessera
