// TrainerFleet: scale_sim's simulated trainers, wherever they run. With `per_process` 0 they are
// threads of the simulator; otherwise they are spread over trainer host processes
// (scale_sim_host) of at most `per_process` each, so that one process does not pay for a
// thousand trainers' gRPC threads, as no process of a cluster does. Either way each trainer is
// seen through its slot (trainer_slots.h), kept current by its host every 25 ms. Not
// thread-safe (the simulator's one thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/process.h"
#include "sim_trainer.h"
#include "trainer_host.h"
#include "trainer_slots.h"

namespace tessera::bench {

struct FleetOptions {
  SimTrainerOptions trainer;
  int per_process = 0;      // 0: in this process
  // Each trainer's id given (0, 1, ... in the order of the slots), as a launcher gives them;
  // else each claims the lowest free one.
  bool given_ids = false;
  std::string dir;          // the regions' files and the hosts' logs
  std::string host_binary;  // scale_sim_host
  int clients_per_connection = 1;
  bool deadlock_checks = false;
};

class TrainerFleet {
 public:
  explicit TrainerFleet(FleetOptions options) : o_(std::move(options)) {}
  ~TrainerFleet();  // ends every trainer: stopped in this process, its host ended otherwise

  // Starts `count` more trainers: the last host's free slots first, then new hosts.
  Status Start(int count);
  size_t size() const { return index_.size(); }
  // Trainer `i` (in the order started).
  const TrainerSlot& operator[](size_t i) const { return Slot(i); }
  // Asks trainer `i` to leave (at its next step).
  void RequestStop(size_t i) { Slot(i).stop = 1; }
  // The CPU seconds the trainers' processes used so far (this one's included).
  double CpuSeconds() const;
  int processes() const;
  // A trainer that failed, or a host process that exited.
  Status FirstError() const;

 private:
  struct Host {
    MappedRegion region;
    std::unique_ptr<TrainerHost> local;  // per_process 0
    std::unique_ptr<Process> process;    // otherwise
    int used = 0;
  };
  StatusOr<std::unique_ptr<Host>> NewHost(int capacity);
  TrainerSlot& Slot(size_t i) const { return hosts_[index_[i].first]->region->slots[index_[i].second]; }

  const FleetOptions o_;
  std::vector<std::unique_ptr<Host>> hosts_;
  std::vector<std::pair<size_t, int>> index_;  // trainer i: its host and slot
  int64_t slots_ = 0;                          // in every host so far
};

}  // namespace tessera::bench
