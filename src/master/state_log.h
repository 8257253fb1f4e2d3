// StateLog: the master's task-queue state in etcd, as a base snapshot plus a log of event
// batches (deltas), so every change is durable before it is acknowledged and the stored size
// does not grow with the number of RPCs:
//   /tessera/<job>/master/state/base          header (settings) + zstd(TaskQueue snapshot) + seq
//   /tessera/<job>/master/state/delta/<seq>   one batch of events after the base
// Every write is fenced by the master's election key: a deposed master cannot write.
//
// Appends are group-committed: one writer thread turns everything appended since its last
// write into one delta (or, every `compact_every` deltas, a new base that replaces them, written
// in the same order as the deltas so nothing is applied twice on replay). Callers wait for their
// ticket to become durable before answering the RPC that caused it.
//
// Thread-safety: Append and Compact must be called under the owner's lock, in the order the
// events were applied; WaitDurable from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "coord/election.h"
#include "coord/etcd_client.h"
#include "tessera/status.h"

namespace tessera::master {

struct LoadedState {
  std::string settings;             // the owner's settings, as saved with the base
  std::string snapshot;             // decompressed TaskQueue snapshot
  std::vector<std::string> deltas;  // event batches after the base, in order
  int64_t seq = 0;                  // the last sequence number used
};

class StateLog {
 public:
  // A new base replaces the deltas after every `compact_every` appended events.
  StateLog(etcd::EtcdClient* etcd, std::string job, Fence fence, int compact_every = 500);
  ~StateLog();

  // Reads the saved state (nullopt if there is none).
  StatusOr<std::optional<LoadedState>> Load();
  // Writes a first base synchronously (after Load, before serving).
  Status WriteBase(const std::string& settings, const std::string& snapshot, int64_t seq);
  // Starts the writer thread; `snapshot` is called (by the owner, under its lock) to compact.
  void Start(int64_t seq, std::string settings);

  // Queues events already applied in memory; returns the ticket to wait for.
  uint64_t Append(std::string events);
  // True when the owner should call Compact() (under its lock, after Append).
  bool WantsCompaction() const;
  // Queues a new base made from `snapshot`, covering everything appended before it.
  uint64_t Compact(std::string snapshot);
  // Blocks until the ticket is durable; Aborted if the master was deposed, Unavailable if etcd
  // could not be written.
  Status WaitDurable(uint64_t ticket);
  // The ticket of the last item queued (0: none): waiting for it waits for everything so far.
  uint64_t LastTicket() const;
  // The first write error (deposed or etcd unreachable), or OK.
  Status failure() const;
  void Stop();

  int64_t bytes_written() const { return bytes_written_; }
  int64_t writes() const { return writes_; }

 private:
  struct Item {
    bool base = false;
    std::string data;
    uint64_t ticket = 0;
  };
  void Run();
  Status Commit(const etcd::Txn& txn);
  std::string BaseKey() const;
  std::string DeltaKey(int64_t seq) const;
  std::string EncodeBase(int64_t seq, const std::string& snapshot) const;

  etcd::EtcdClient* etcd_;
  std::string job_;
  Fence fence_;
  const int compact_every_;
  std::string settings_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  uint64_t next_ticket_ = 1;
  uint64_t durable_ = 0;
  int appended_since_base_ = 0;  // events appended since the last base was queued
  int64_t seq_ = 0;
  Status failure_;
  bool stop_ = false;
  std::thread thread_;
  int64_t bytes_written_ = 0;
  int64_t writes_ = 0;
};

}  // namespace tessera::master
