// ShardRouter (see shard_router.h).
#include "pserver/shard_router.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

namespace tessera {
namespace {

using google::protobuf::internal::WireFormatLite;

// The varint field `field` of a serialized message, or -1.
int64_t PeekVarint(std::string_view header, int field) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(header.data()),
                                            static_cast<int>(header.size()));
  while (true) {
    uint32_t tag = in.ReadTag();
    if (tag == 0) return -1;
    if (WireFormatLite::GetTagFieldNumber(tag) == field &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t v;
      return in.ReadVarint64(&v) ? static_cast<int64_t>(v) : -1;
    }
    if (!WireFormatLite::SkipField(&in, tag)) return -1;
  }
}

void Refuse(Responder& r, const std::string& why) {
  wire::DataReply reply;
  reply.set_code(static_cast<int>(StatusCode::kFailedPrecondition));
  reply.set_message(why);
  reply.set_reason(wire::DataReply::STALE_EPOCH);
  std::string h = reply.SerializeAsString();
  r.Send(h, {});
}

}  // namespace

int PeekPserverIndex(std::string_view header) {
  int64_t v = PeekVarint(header, wire::DataRequest::kPserverIndexFieldNumber);
  return v < 0 || v > INT32_MAX ? (v == -1 ? 0 : -1) : static_cast<int>(v);
}

bool PeekIsReplicate(std::string_view header) {
  return PeekVarint(header, wire::DataRequest::kOpFieldNumber) == wire::DataRequest::REPLICATE;
}

ShardRouter::ShardRouter(int shards, MakeBackup make_backup)
    : shards_(shards), make_backup_(std::move(make_backup)), services_(static_cast<size_t>(shards)) {}

RequestWatcher* ShardRouter::Watch(std::string_view header, size_t payload_bytes) {
  const int shard = PeekPserverIndex(header);
  if (shard < 0 || shard >= shards_) return nullptr;
  std::shared_ptr<PserverService> s = Get(shard);
  return s ? s->Watch(header, payload_bytes) : nullptr;
}

void ShardRouter::Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> r) {
  const int shard = PeekPserverIndex(header);
  if (shard < 0 || shard >= shards_) {
    return Refuse(
        *r, "this pserver holds shards 0.." + std::to_string(shards_ - 1) + ", not " + std::to_string(shard));
  }
  std::shared_ptr<PserverService> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = services_[shard];
    if (!s && PeekIsReplicate(header) && make_backup_) {
      s = make_backup_(shard);
      services_[shard] = s;
    }
  }
  if (!s) return Refuse(*r, "this pserver does not hold shard " + std::to_string(shard) + " now");
  s->Handle(header, payload, std::move(r));
}

std::shared_ptr<PserverService> ShardRouter::Get(int shard) const {
  std::lock_guard<std::mutex> lock(mu_);
  return services_[shard];
}

void ShardRouter::Set(int shard, std::shared_ptr<PserverService> service) {
  std::lock_guard<std::mutex> lock(mu_);
  services_[shard] = std::move(service);
}

std::vector<std::shared_ptr<PserverService>> ShardRouter::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  return services_;
}

}  // namespace tessera
