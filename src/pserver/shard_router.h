// ShardRouter: the request handler of a pserver process that holds several shards (--replicas >
// 1): each request goes to the PserverService of the shard it names (DataRequest.pserver_index),
// whether this process is that shard's primary or one of its backups. A replication record for a
// shard this process does not hold yet makes a backup for it (through `make_backup`): that is how
// a primary hands a shard to a new host. Anything else for a shard not held here is answered
// STALE_EPOCH, so the trainer looks the shard up again.
//
// Thread-safe: Handle() runs on transport threads; the shard table is guarded by a mutex.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "pserver/pserver_service.h"
#include "transport/transport.h"

namespace tessera {

// The pserver index field of a serialized DataRequest, read without parsing the rest (which may
// be large); -1 if the header is malformed or has none.
int PeekPserverIndex(std::string_view header);
// Whether a serialized DataRequest is a REPLICATE.
bool PeekIsReplicate(std::string_view header);

class ShardRouter : public RequestHandler {
 public:
  using MakeBackup = std::function<std::shared_ptr<PserverService>(int shard)>;
  ShardRouter(int shards, MakeBackup make_backup);

  RequestWatcher* Watch(std::string_view header, size_t payload_bytes) override;
  void Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> responder) override;

  std::shared_ptr<PserverService> Get(int shard) const;
  void Set(int shard, std::shared_ptr<PserverService> service);
  // Every shard's service held here (null where none).
  std::vector<std::shared_ptr<PserverService>> All() const;

 private:
  const int shards_;
  MakeBackup make_backup_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<PserverService>> services_;
};

}  // namespace tessera
