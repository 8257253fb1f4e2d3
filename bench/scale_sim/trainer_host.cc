// A host of simulated trainers (see trainer_host.h).
#include "trainer_host.h"

#include <algorithm>
#include <cstring>

#include "common/clock.h"

namespace tessera::bench {

TrainerHost::TrainerHost(TrainerRegion* region, SimTrainerOptions options, std::chrono::milliseconds round)
    : region_(region), o_(std::move(options)), round_(round) {}

TrainerHost::~TrainerHost() { Stop(); }

void TrainerHost::Start() {
  thread_ = std::thread([this] {
    // Bounded by Stop().
    while (!stop_) {
      Round();
      std::this_thread::sleep_for(round_);
    }
  });
}

void TrainerHost::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (auto& t : trainers_) t->Stop();
  for (auto& t : trainers_) t->Join();
  Round();  // the last figures, each trainer's end included
}

void TrainerHost::Round() {
  const size_t wanted =
      static_cast<size_t>(std::clamp<int64_t>(region_->wanted.load(), 0, region_->capacity.load()));
  // Bounded by the region's capacity.
  while (!stop_ && trainers_.size() < wanted) {
    SimTrainerOptions o = o_;
    if (const int64_t first = region_->first_id.load(); first >= 0)
      o.trainer_id = std::to_string(first + static_cast<int64_t>(trainers_.size()));
    trainers_.push_back(std::make_unique<SimTrainer>(o));
    trainers_.back()->Start();
    TrainerSlot& s = region_->slots[trainers_.size() - 1];
    s.started_ms = trainers_.back()->started_ms();
  }
  for (size_t i = 0; i < trainers_.size(); ++i) {
    SimTrainer& t = *trainers_[i];
    TrainerSlot& s = region_->slots[i];
    if (s.done.load() != 0) continue;  // its last figures are in
    if (s.stop.load() != 0) t.Stop();
    s.records = t.records();
    s.tasks_done = t.tasks_done();
    s.tasks_stale = t.tasks_stale();
    s.task_left = t.task_left();
    s.first_record_ms = t.first_record_ms();
    for (int p = 0; p < SimTrainer::kPhases; ++p)
      s.phase_ms[p] = t.phase_ms(static_cast<SimTrainer::Phase>(p));
    if (!t.done()) {
      s.pserver0_epoch = t.PserverEpoch(0);
      continue;
    }
    const Status e = t.error();
    if (!e.ok()) {
      const std::string text = e.ToString();
      std::memcpy(s.error, text.data(), std::min(text.size(), sizeof s.error - 1));
      s.failed = 1;
    }
    s.done.store(1, std::memory_order_release);
  }
  region_->heartbeat_ms = WallMillis();
}

}  // namespace tessera::bench
