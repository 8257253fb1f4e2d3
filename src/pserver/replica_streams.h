// Replication streams (--replicas > 1): ShardOutbox is a primary shard's ReplicaOutbox, one
// ordered ReplicaStream per backup host. A stream owns a thread that sends its records one at a
// time over its own data-plane connection to the backup and retries each until acknowledged
// (reconnecting with backoff); a backup that reports a gap gets a fresh snapshot. After every
// acknowledgement the outbox tells the service the newest record every stream holds
// (PserverService::Committed). A stream runs until it is removed (its backup died or left the
// shard): the records it still held no longer wait for it.
//
// Thread-safe. Lock order: the service's lock, then the outbox's (Publish is called under the
// service's lock; Committed is called with no outbox lock held).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "pserver/pserver_service.h"
#include "transport/transport.h"

namespace tessera {

class ShardOutbox : public ReplicaOutbox {
 public:
  // `service`: the shard's primary; `transport`: options for the connections to backups.
  ShardOutbox(PserverService* service, TransportOptions transport);
  ~ShardOutbox() override;

  bool Publish(std::shared_ptr<const ReplicaMessage> m) override;

  // Starts a stream to host `host` (registered at `epoch`) at `endpoint` (a tcp, shm or grpc
  // endpoint, as `kind`), first with a snapshot of the shard. FailedPrecondition before the shard
  // is initialized.
  Status AddStream(int host, int64_t epoch, TransportKind kind, const std::string& endpoint);
  // The registration epoch of the host the stream to `host` goes to (0: no stream). A host index
  // taken again by a new process is a new host: its stream starts over.
  int64_t EpochOf(int host) const;
  // Stops the stream to `host` (no-op without one).
  void RemoveStream(int host);
  bool HasStream(int host) const;
  // Whether the stream to `host` has applied its snapshot (the backup holds the shard).
  bool Synced(int host) const;
  // The newest record the stream to `host` had acknowledged (-1: no stream).
  int64_t Acked(int host) const;
  std::vector<int> hosts() const;
  // Stops every stream.
  void Close();

 private:
  struct Stream;
  void Run(Stream* s);
  // The newest record every stream acknowledged, to the service. REQUIRES: mu_ not held.
  void ReportCommitted();

  PserverService* service_;
  TransportOptions transport_;
  mutable std::mutex mu_;  // guards streams_ and every stream's queue and state
  std::map<int, std::shared_ptr<Stream>> streams_;
};

}  // namespace tessera
