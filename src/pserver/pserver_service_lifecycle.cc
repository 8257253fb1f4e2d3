// PserverService (see pserver_service.h): its life around the requests. Trainers leaving the
// group, serving stopped (a lost lease, shutdown) and resumed, and the counters.
#include <spdlog/spdlog.h>

#include "pserver/pserver_service.h"

namespace tessera {

void PserverService::TrainerLeft(const std::string& trainer, int64_t epoch) {
  std::vector<Reply> replies;
  {
    MutexLock lock(&mu_);
    auto before = consistency_->members();
    consistency_->Leave(trainer, epoch);
    if (consistency_->members().size() != before.size()) {
      spdlog::info("trainer {} (epoch {}) left pserver {}'s group at version {}", trainer, epoch,
                   options_.index, consistency_->version());
    }
    ApplyReadyBlocks(&replies);  // blocks that waited only for it
    Drain(&replies);
    HoldUntilCommitted(&replies);
  }
  for (auto& x : replies) Send(x);
}

void PserverService::StopServing(const Status& why) {
  std::map<uint64_t, PullQueue::Pending> waiting;
  std::vector<Reply> held;
  {
    MutexLock lock(&mu_);
    serving_ = false;
    stop_reason_ = why;
    waiting = pulls_.TakeAll();
    held = held_replies_.TakeAll();  // not committed: the trainers send them again to whoever serves next
    for (auto& [t, p] : waiting) consistency_->CancelPull(t);
  }
  due_.Wake();  // replies waiting for the checkpoint thread go out (and fail)
  for (auto& rep : held) {
    SendError(*rep.responder,
              Status::Unavailable("pserver " + std::to_string(options_.index) +
                                  " stopped serving: " + why.message()),
              wire::DataReply::NOT_SERVING);
  }
  for (auto& [t, p] : waiting) {
    SendError(*p.responder,
              Status::Unavailable("pserver " + std::to_string(options_.index) +
                                  " stopped serving: " + why.message()),
              wire::DataReply::NOT_SERVING);
  }
}

void PserverService::ResumeServing() {
  MutexLock lock(&mu_);
  serving_ = true;
  stop_reason_ = Status::OK();
}

PserverService::Counters PserverService::counters() const {
  MutexLock lock(&mu_);
  Counters c = counters_;
  c.version = consistency_->version();
  c.initialized = initialized_;
  c.overlapped = data_overlapped_.load(std::memory_order_relaxed);
  c.param_bytes = store_.TotalBytes();
  c.params = store_.Stats();
  return c;
}

}  // namespace tessera
