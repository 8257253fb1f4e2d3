// TrainerHost: runs the simulated trainers a region (trainer_slots.h) asks for, and keeps their
// slots current. Every `round` it starts the trainers the region wants and does not run yet,
// passes on the stop requests, and copies each trainer's figures (and pserver 0's epoch in its
// directory) into its slot. It runs either in a process of its own (scale_sim_host, so that a
// thousand trainers' threads are spread over several processes, as in a cluster) or in the
// simulator's, on the same code path. The round's thread is its only one; the trainers have
// theirs (sim_trainer.h).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "sim_trainer.h"
#include "trainer_slots.h"

namespace tessera::bench {

class TrainerHost {
 public:
  TrainerHost(TrainerRegion* region, SimTrainerOptions options,
              std::chrono::milliseconds round = std::chrono::milliseconds(25));
  ~TrainerHost();  // stops every trainer and waits for them (each leaves at its next step)

  void Start();
  // One round (what the thread does every `round`); for tests and for the last copy.
  void Round();
  // Stops the rounds and the trainers, and waits for them.
  void Stop();

 private:
  TrainerRegion* const region_;
  const SimTrainerOptions o_;
  const std::chrono::milliseconds round_;
  std::vector<std::unique_ptr<SimTrainer>> trainers_;  // slot i runs trainers_[i]
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera::bench
