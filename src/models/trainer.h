// RunTrainer: Tessera's generic trainer loop for a built-in model (`tessera train`, and every
// trainer `tessera local --model NAME` starts). It connects (registering the trainer),
// initializes or joins the parameters, then repeats: read a batch of records from the tasks the
// master hands out, compute the gradients, push them and pull the next parameters, acknowledge the
// records as trained. In sync and ssp mode a trainer with nothing to read right now still takes
// part in every step with an empty push, so the others are not held up. Progress (samples,
// cost) goes to the master about once a second; at the end of each pass the trainer with the
// lowest live id evaluates on the held-out data set and reports the metrics.
// A stop request (SIGTERM) ends the loop after the current step, acknowledging what was trained.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "models/model.h"
#include "tessera/connection.h"
#include "tessera/status.h"

namespace tessera::models {

struct TrainerOptions {
  ConnectionOptions connection;  // etcd, the job and its secret
  std::string trainer_id;        // empty: the lowest free number
  std::string model;             // mlp, logreg, word2vec
  ModelOptions model_options;
  std::string store;         // the store as mounted here (empty: the master's path)
  std::string eval_dataset;  // held-out data set in the store (empty: no evaluation)
  int64_t lease_ttl_seconds = 10;
  std::string transport;  // empty: TESSERA_TRANSPORT, else auto
  std::chrono::milliseconds request_timeout{std::chrono::minutes(5)};
  const std::atomic<bool>* stop = nullptr;
};

struct TrainerResult {
  int64_t steps = 0;
  int64_t samples = 0;
  // Steps whose first work the model did while the step before travelled, on values the pserver
  // wrote in place as it made them (Model::ComputeAhead).
  int64_t steps_ahead = 0;
  std::vector<Metric> final_metrics;  // the last evaluation, if this trainer evaluated
  // Where the loop's time went, in seconds: reading records (including waits for tasks), the
  // model's forward and backward, the push and pull (with the wait at the barrier), acknowledging
  // the records and reporting progress, and evaluating on the held-out data between passes.
  struct Phases {
    double read = 0, compute = 0, exchange = 0, acknowledge = 0, evaluate = 0;
  } seconds;
};

// "read 0.210 s, compute 2.403 s, exchange 0.931 s, acknowledge 0.020 s" for the trainer's last
// line, and ", evaluate 0.310 s" when it evaluated.
std::string PhasesSummary(const TrainerResult::Phases& p);
// The phases a trainer's last line gives after "time: " (PhasesSummary's text), for benches and
// tests; nothing when the line has none.
std::optional<TrainerResult::Phases> PhasesFromLine(const std::string& line);

StatusOr<TrainerResult> RunTrainer(const TrainerOptions& options);

}  // namespace tessera::models
