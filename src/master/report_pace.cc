// How often trainers report (see report_pace.h).
#include "master/report_pace.h"

#include <algorithm>

namespace tessera::master {
namespace {

// `trainers` reports spread to about `per_second` a second, never more often than `floor`.
std::chrono::milliseconds Spread(int64_t trainers, double per_second, std::chrono::milliseconds floor) {
  const auto spread =
      std::chrono::milliseconds(static_cast<int64_t>(1000.0 * static_cast<double>(trainers) / per_second));
  return std::max(floor, spread);
}

}  // namespace

ReportPace PaceFor(int64_t trainers, bool tail) {
  using std::chrono::milliseconds;
  const int64_t n = std::max<int64_t>(1, trainers);
  ReportPace p;
  p.progress = Spread(n, 50, milliseconds(1000));
  p.task_progress = tail ? Spread(n, 500, milliseconds(25)) : Spread(n, 50, milliseconds(250));
  return p;
}

}  // namespace tessera::master
