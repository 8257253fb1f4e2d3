// Checkpoint files (see checkpoint_file.h).
#include "checkpoint/checkpoint_file.h"

#include <cstring>
#include <filesystem>

#include "common/bytes.h"
#include "common/digest.h"
#include "common/files.h"
#include "common/random.h"
#include "job/wire_convert.h"

namespace tessera {
namespace {

constexpr std::string_view kMagic = "TSCK";
constexpr std::string_view kTrailer = "TSCKEND";
// 1: the first; 2: sparse tables' limits (declarations) and their bookkeeping (tables); 3: deltas
// (the kind and parent in the header, removed keys in tables). Formats 1 and 2 are still read.
constexpr uint64_t kFormat = 3;
constexpr size_t kDigestHex = 64;

template <typename T>
std::string_view AsBytes(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

template <typename T>
bool GetArray(ByteReader& r, std::vector<T>* out) {
  std::string_view b;
  if (!r.GetView(&b) || b.size() % sizeof(T) != 0) return false;
  out->resize(b.size() / sizeof(T));
  if (!b.empty()) std::memcpy(out->data(), b.data(), b.size());
  return true;
}

}  // namespace

std::string EncodeCheckpoint(const Checkpoint& c) {
  std::string out(kMagic);
  ByteWriter w(&out);
  w.PutVarint(kFormat);
  w.PutString(c.job);
  w.PutSigned(c.index);
  w.PutSigned(c.version);
  w.PutSigned(c.created_ms);
  w.PutVarint(c.shard.delta ? 1 : 0);
  w.PutString(c.parent);
  w.PutVarint(c.shard.decls.size());
  for (const auto& d : c.shard.decls) {
    w.PutString(d.name);
    w.PutVarint(d.sparse ? 1 : 0);
    w.PutSigned(d.size);
    w.PutSigned(d.dim);
    w.PutString(ToWire(d.optimizer).SerializeAsString());
    w.PutString(ToWire(d.init).SerializeAsString());
    w.PutString(ToWire(d.limits).SerializeAsString());
  }
  w.PutVarint(c.shard.dense.size());
  for (const auto& b : c.shard.dense) {
    w.PutString(b.param);
    w.PutSigned(b.block);
    w.PutSigned(b.t);
    w.PutString(AsBytes(b.data));
  }
  w.PutVarint(c.shard.sparse.size());
  for (const auto& t : c.shard.sparse) {
    w.PutString(t.param);
    w.PutString(AsBytes(t.keys));
    w.PutString(AsBytes(t.t));
    w.PutString(AsBytes(t.arena));
    w.PutString(AsBytes(t.last));
    w.PutSigned(t.updates);
    w.PutString(AsBytes(t.sketch));
    w.PutSigned(t.admitted);
    w.PutSigned(t.evicted);
    w.PutString(AsBytes(t.removed));
  }
  std::string digest = Sha256Hex(out);
  out += kTrailer;
  out += digest;
  return out;
}

StatusOr<Checkpoint> DecodeCheckpoint(std::string_view bytes, const std::string& what) {
  auto bad = [&](const std::string& why) { return Status::DataLoss("checkpoint " + what + ": " + why); };
  if (bytes.size() < kMagic.size() + kTrailer.size() + kDigestHex ||
      bytes.substr(0, kMagic.size()) != kMagic) {
    return bad("not a Tessera checkpoint (no TSCK header)");
  }
  size_t body = bytes.size() - kTrailer.size() - kDigestHex;
  if (bytes.substr(body, kTrailer.size()) != kTrailer) return bad("truncated (no trailer)");
  if (Sha256Hex(bytes.substr(0, body)) != bytes.substr(body + kTrailer.size())) {
    return bad("its contents do not match its digest (corrupt)");
  }
  ByteReader r(bytes.substr(kMagic.size(), body - kMagic.size()));
  Checkpoint c;
  uint64_t format = 0, n = 0;
  int64_t index = 0;
  if (!r.GetVarint(&format) || format < 1 || format > kFormat)
    return bad("unknown format " + std::to_string(format));
  if (!r.GetString(&c.job) || !r.GetSigned(&index) || !r.GetSigned(&c.version) || !r.GetSigned(&c.created_ms))
    return bad("malformed header");
  c.index = static_cast<int>(index);
  if (format >= 3) {
    uint64_t delta = 0;
    if (!r.GetVarint(&delta) || delta > 1 || !r.GetString(&c.parent)) return bad("malformed header");
    c.shard.delta = delta == 1;
    if (c.shard.delta == c.parent.empty())
      return bad("a delta needs the checkpoint it applies on, a base none");
  }
  if (!r.GetVarint(&n) || n > r.remaining()) return bad("malformed declarations");
  for (uint64_t i = 0; i < n; ++i) {
    ParamDecl d;
    uint64_t sparse;
    int64_t dim;
    std::string opt, init, limits;
    if (!r.GetString(&d.name) || !r.GetVarint(&sparse) || !r.GetSigned(&d.size) || !r.GetSigned(&dim) ||
        !r.GetString(&opt) || !r.GetString(&init) || (format >= 2 && !r.GetString(&limits)))
      return bad("malformed declaration " + std::to_string(i));
    d.sparse = sparse != 0;
    d.dim = static_cast<int>(dim);
    wire::OptimizerSpec os;
    wire::InitializerSpec is;
    if (!os.ParseFromString(opt) || !is.ParseFromString(init))
      return bad("malformed spec of '" + d.name + "'");
    auto o = FromWire(os);
    auto in = FromWire(is);
    if (!o.ok() || !in.ok()) return bad("bad optimizer or initializer of '" + d.name + "'");
    d.optimizer = *o;
    d.init = *in;
    wire::TableLimitsSpec ls;
    if (!ls.ParseFromString(limits)) return bad("malformed limits of '" + d.name + "'");
    auto lim = FromWire(ls);
    if (!lim.ok()) return bad("bad limits of '" + d.name + "'");
    d.limits = *lim;
    c.shard.decls.push_back(std::move(d));
  }
  if (!r.GetVarint(&n) || n > r.remaining()) return bad("malformed dense section");
  for (uint64_t i = 0; i < n; ++i) {
    ShardSnapshot::DenseBlock b;
    if (!r.GetString(&b.param) || !r.GetSigned(&b.block) || !r.GetSigned(&b.t) || !GetArray(r, &b.data))
      return bad("malformed dense block " + std::to_string(i));
    c.shard.dense.push_back(std::move(b));
  }
  if (!r.GetVarint(&n) || n > r.remaining()) return bad("malformed sparse section");
  for (uint64_t i = 0; i < n; ++i) {
    ShardSnapshot::SparseTable t;
    if (!r.GetString(&t.param) || !GetArray(r, &t.keys) || !GetArray(r, &t.t) || !GetArray(r, &t.arena))
      return bad("malformed sparse table " + std::to_string(i));
    if (format >= 2 && (!GetArray(r, &t.last) || !r.GetSigned(&t.updates) || !GetArray(r, &t.sketch) ||
                        !r.GetSigned(&t.admitted) || !r.GetSigned(&t.evicted)))
      return bad("malformed limits of sparse table " + std::to_string(i));
    if (format >= 3 && !GetArray(r, &t.removed))
      return bad("malformed removed keys of sparse table " + std::to_string(i));
    c.shard.sparse.push_back(std::move(t));
  }
  if (!r.done()) return bad("unexpected bytes after the sparse tables");
  return c;
}

StatusOr<WrittenCheckpoint> WriteCheckpoint(const std::string& dir, const Checkpoint& c) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot create checkpoint directory '" + dir + "': " + ec.message());
  WrittenCheckpoint w;
  w.uuid = NewUuid();
  w.path = CheckpointPath(dir, c.job, c.index, w.uuid);
  std::string bytes = EncodeCheckpoint(c);
  w.digest = Sha256Hex(bytes);
  w.bytes = static_cast<int64_t>(bytes.size());
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(w.path, bytes));
  return w;
}

StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, const std::string& digest) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::NotFound("checkpoint " + path + " does not exist");
  TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  if (!digest.empty() && Sha256Hex(bytes) != digest) {
    return Status::DataLoss("checkpoint " + path +
                            ": its SHA-256 is not the one recorded in etcd (corrupt or replaced)");
  }
  return DecodeCheckpoint(bytes, path);
}

}  // namespace tessera
