// FetchAheadRule (see fetch_ahead.h).
#include "client/fetch_ahead.h"

namespace tessera {

bool FetchAheadRule::Now(int64_t left, int64_t read, double seconds) const {
  if (floor_ <= 0) return false;
  if (left <= floor_) return true;
  if (read < kRateAfterRecords || seconds <= 0 || last_fetch_seconds_ <= 0) return false;
  const double per_second = static_cast<double>(read) / seconds;
  return static_cast<double>(left) <= per_second * kLead * last_fetch_seconds_;
}

}  // namespace tessera
