// SimTrainer: a trainer's coordination without its compute or data plane, as scale_sim runs
// many in one process, each on a thread of its own with its own etcd connections, as a real
// trainer process has them: the Client's (its lease and registration, TrainerMembership; the
// pservers' directory and its watches, PserverDirectory; the master's client for progress
// reports) and the Reader's (task fetch, ahead-fetch, acknowledgement and progress for task
// splitting, against the real master). A step is a sleep of `step` per `batch` records, after
// which the batch is acknowledged (Trained) and its samples reported (ProgressReporter).
// Thread-safe: the harness reads its figures while it runs.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "client/pserver_directory.h"
#include "common/clock.h"
#include "tessera/status.h"

namespace tessera::bench {

struct SimTrainerOptions {
  std::string etcd;  // host:port, or several joined by commas
  std::string job;
  std::string store;
  int pservers = 1;
  int lease_ttl_seconds = 10;
  int batch = 32;
  std::chrono::milliseconds step{100};
  // The trainer id, as a launcher gives it (a Kubernetes pod's index, an MPI rank); empty: the
  // trainer claims the lowest free one, as one started by hand does.
  std::string trainer_id;
};

class SimTrainer {
 public:
  explicit SimTrainer(SimTrainerOptions options);
  ~SimTrainer();  // stops, and leaves the job as a trainer that ends does

  void Start();
  // Leaves now (the thread ends at its next step).
  void Stop();
  void Join();

  bool training() const { return first_record_ms_.load() > 0; }
  bool done() const { return done_.load(); }
  int64_t records() const { return records_.load(); }
  // Tasks acknowledged to the master so far, and acknowledgements it refused (the task had been
  // handed out again meanwhile): the reader's counts.
  int64_t tasks_done() const { return tasks_done_.load(); }
  int64_t tasks_stale() const { return tasks_stale_.load(); }
  // Records left in the task it reads now, as of its last step (-1: none yet).
  int64_t task_left() const { return task_left_.load(); }
  int64_t started_ms() const { return started_ms_; }
  int64_t first_record_ms() const { return first_record_ms_.load(); }
  // When each phase of its join ended (0: not yet): connected (the job read), registered (lease
  // and registration), every pserver ready in its directory, its reader open.
  enum Phase { kConnected, kRegistered, kPserversReady, kReaderOpen, kPhases };
  int64_t phase_ms(Phase p) const { return phase_ms_[p].load(); }
  Status error() const;
  // Pserver `index`'s epoch in this trainer's directory now (0: not registered).
  int64_t PserverEpoch(int index) const;

 private:
  void Run();
  Status Train();

  const SimTrainerOptions o_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, done_{false};
  std::atomic<int64_t> records_{0}, first_record_ms_{0}, tasks_done_{0}, tasks_stale_{0}, task_left_{-1};
  std::atomic<int64_t> phase_ms_[kPhases] = {};
  int64_t started_ms_ = 0;
  mutable std::mutex mu_;
  Status error_;
  std::shared_ptr<PserverDirectory> directory_;  // while it runs
};

}  // namespace tessera::bench
