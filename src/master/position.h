// Data positions for consistent checkpoints (sync jobs with checkpoint steps N): at every version
// V that is a multiple of N each pserver checkpoints its shard, and each trainer reports what it
// held at V (TrainerPosition). The master's PositionBook says when the reports for V are
// complete; the TaskQueue turns them into the DataPosition that belongs with the model at V,
// which the master saves in etcd. A rollback to V loads every pserver's checkpoint of V and
// rewinds the task queue to the DataPosition of V. ChooseRollbackVersion picks V.
// Pure (no I/O, no clock); not thread-safe (the master holds its lock).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessera/status.h"

namespace tessera::master {

struct HeldPosition {
  int64_t task = 0;
  int64_t epoch = 0;
  int pass = 0;
  int64_t offset = 0;   // records trained so far
  int64_t records = 0;  // records in the task
};

struct TrainerPosition {
  std::string trainer;
  int64_t version = 0;
  int64_t first_step = 0;  // the first step it pushed to
  std::vector<HeldPosition> tasks;
};

// What the model at `version` contains of the data: the pass it is in, the tasks of that pass
// it contains whole, and those it contains in part (task, records), in the order to continue.
struct DataPosition {
  int64_t version = 0;
  int pass = 0;
  std::vector<bool> done;
  std::vector<std::pair<int64_t, int64_t>> partial;

  // A fresh job's position (nothing trained) over `tasks` tasks.
  static DataPosition Start(int64_t tasks);
  std::string ToJson() const;
  // DataLoss naming what is wrong; the task count must match `tasks`.
  static StatusOr<DataPosition> FromJson(const std::string& json, int64_t tasks);
};

class PositionBook {
 public:
  // A trainer's report. A report for a version it already reported replaces it.
  void Add(const TrainerPosition& p);
  // The trainers registered now; only they are waited for.
  void SetLive(std::set<std::string> trainers) { live_ = std::move(trainers); }
  // Versions whose reports are complete, ascending: every live trainer reported it, or began
  // after it. None while a live trainer has not reported anything yet.
  std::vector<int64_t> Complete() const;
  std::vector<TrainerPosition> ReportsAt(int64_t version) const;
  // Drops every version <= `version`.
  void ForgetThrough(int64_t version);
  size_t pending_versions() const { return reports_.size(); }

 private:
  std::set<std::string> live_;
  std::map<std::string, int64_t> first_step_;
  std::map<int64_t, std::map<std::string, TrainerPosition>> reports_;
};

// The version to roll back to: the highest version that every pserver (0..pservers-1) holds a
// good checkpoint of, and whose data position is known (saved, or version 0 of a fresh job).
// `good` maps each pserver index to the versions of its good checkpoints. None if there is none.
std::optional<int64_t> ChooseRollbackVersion(int pservers, const std::map<int, std::set<int64_t>>& good,
                                             const std::set<int64_t>& positions);
// What ChooseRollbackVersion chose from, for a log line when it found nothing: "pserver 0 holds
// [40,80]; pserver 1 holds [40]; data positions saved for [80]".
std::string DescribeRollbackCandidates(int pservers, const std::map<int, std::set<int64_t>>& good,
                                       const std::set<int64_t>& positions);

}  // namespace tessera::master
