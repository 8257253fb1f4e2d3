// PserverNode's checkpoints (see pserver_node.h): the thread that writes a service's checkpoints,
// at the versions its snapshot queue took (consistent checkpoints) or by time and steps.
#include <spdlog/spdlog.h>

#include "checkpoint/checkpointer.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "pserver/pserver_node.h"
#include "pserver/pserver_service.h"

namespace tessera {

void PserverNode::ObserveCheckpoint(double seconds, int64_t version) {
  last_checkpoint_ms_ = WallMillis();
  if (!prom_) return;
  prom_
      ->GetHistogram("tessera_pserver_checkpoint_seconds", "time to copy, write and record a checkpoint",
                     metrics::LatencyBuckets())
      .Observe(seconds);
  prom_->GetGauge("tessera_pserver_checkpoint_version", "version of the last checkpoint recorded")
      .Set(static_cast<double>(version));
}

void PserverNode::WakeCheckpointThreads() {
  // Without the lock (the service calls this under its own): a wake between a thread's check of
  // the count and its wait is seen at its next timeout (20 ms).
  snapshot_wakes_.fetch_add(1);
  cv_.notify_all();
}

void PserverNode::CheckpointLoop(PserverService* service, Checkpointer* checkpointer, bool consistent) {
  int64_t last_version = -1;
  TimePoint last_time = Now();
  service->SetCheckpointChain(checkpointer->chain());
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t woken = snapshot_wakes_.load();
  while (!stop_ && !lost_) {
    cv_.wait_for(lock, std::chrono::milliseconds(consistent ? 20 : 100),
                 [&] { return stop_ || lost_ || snapshot_wakes_.load() != woken; });
    woken = snapshot_wakes_.load();
    if (stop_ || lost_) break;
    lock.unlock();
    // The service took the copies at the due versions (or, for a checkpoint asked for while a
    // step's blocks were partly applied, at the barrier after it); write them all, oldest first:
    // every pserver of the job must hold the same versions.
    bool wrote = false;
    while (auto taken = service->TakeDueSnapshot()) {
      wrote = true;
      auto written = Now();
      const int64_t version = taken->version;
      auto rec = checkpointer->Save(std::move(*taken));
      service->SetCheckpointChain(checkpointer->chain());
      if (rec.ok()) {
        spdlog::info("pserver {}: consistent checkpoint of version {} recorded ({}; {} ms writing)",
                     index_.load(), version, rec->Describe(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(Now() - written).count());
        last_version = version;
        last_time = Now();
      } else {
        spdlog::error("{}pserver {}: checkpoint of version {} failed: {}", kNoticeMark, index_.load(),
                      version, rec.status().ToString());
      }
    }
    if (consistent || wrote) {
      lock.lock();
      continue;
    }
    int64_t v = service->CheckpointableVersion();
    double since = std::chrono::duration<double>(Now() - last_time).count();
    bool due =
        v >= 0 && v != last_version &&
        (last_version < 0 || (options_.checkpoint_seconds > 0 && since >= options_.checkpoint_seconds) ||
         (options_.checkpoint_steps > 0 && v - last_version >= options_.checkpoint_steps));
    if (due) {
      auto start = Now();
      auto c = service->SnapshotForCheckpoint(options_.job);
      auto copied = Now();
      if (c.ok()) {
        const int64_t version = c->version;
        auto rec = checkpointer->Save(std::move(*c));
        service->SetCheckpointChain(checkpointer->chain());
        if (rec.ok()) {
          ObserveCheckpoint(std::chrono::duration<double>(Now() - start).count(), version);
          spdlog::info(
              "pserver {}: checkpoint of version {} recorded ({}; {} ms copying under the lock, {} ms "
              "writing)",
              index_.load(), version, rec->Describe(),
              std::chrono::duration_cast<std::chrono::milliseconds>(copied - start).count(),
              std::chrono::duration_cast<std::chrono::milliseconds>(Now() - copied).count());
          last_version = version;
        } else {
          spdlog::error("{}pserver {}: checkpoint of version {} failed: {}", kNoticeMark, index_.load(),
                        version, rec.status().ToString());
        }
      }
      last_time = Now();  // also after a failure: retry at the next period, not at once
    }
    lock.lock();
  }
}

}  // namespace tessera
