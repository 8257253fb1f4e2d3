// When the data reader fetches its next task ahead (pure: the reader measures, this decides).
//
// Fetching ahead hides the master's answer (a dispatch written to etcd) and the chunk's read and
// decompression behind the records left in the current task. A fixed count of records left is
// too late for a fast model on a big task: on 4 MiB tasks the fetch took ~9 ms while 256
// records of the built-in mlp trained in ~4, and the trainer waited half the tasks. So the
// reader starts once the records left, at the rate this task's records are being read, would
// last no longer than kLead x the last fetch took -- and at the latest at `floor` records left.
#pragma once

#include <cstdint>

namespace tessera {

class FetchAheadRule {
 public:
  // The margin over the last fetch's time: a fetch may take longer than the last one (a loaded
  // machine, a master failing over) and the records may be read faster.
  static constexpr double kLead = 3.0;
  // Records of a task read before its rate is trusted.
  static constexpr int64_t kRateAfterRecords = 64;

  // floor: fetch at this many records left or fewer whatever the timing says (<= 0: never fetch
  // ahead).
  explicit FetchAheadRule(int64_t floor) : floor_(floor) {}

  // A fetch (ahead or not) took this long.
  void Fetched(double seconds) { last_fetch_seconds_ = seconds; }

  // Whether to start fetching now: `left` records of the task are left, `read` of it were read in
  // `seconds` since its first record.
  bool Now(int64_t left, int64_t read, double seconds) const;

 private:
  int64_t floor_;
  double last_fetch_seconds_ = 0;
};

}  // namespace tessera
