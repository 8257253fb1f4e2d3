// Constructors for etcd value types (see etcd_types.h).
#include "coord/etcd_types.h"

namespace tessera::etcd {

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char c = static_cast<unsigned char>(end.back());
    if (c < 0xff) {
      end.back() = static_cast<char>(c + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

static Compare MakeCompare(Compare::Target t, std::string key, Compare::Result r) {
  Compare c;
  c.target = t;
  c.key = std::move(key);
  c.result = r;
  return c;
}

Compare Compare::Version(std::string key, Result r, int64_t v) {
  Compare c = MakeCompare(Target::kVersion, std::move(key), r);
  c.number = v;
  return c;
}
Compare Compare::CreateRevision(std::string key, Result r, int64_t v) {
  Compare c = MakeCompare(Target::kCreateRevision, std::move(key), r);
  c.number = v;
  return c;
}
Compare Compare::ModRevision(std::string key, Result r, int64_t v) {
  Compare c = MakeCompare(Target::kModRevision, std::move(key), r);
  c.number = v;
  return c;
}
Compare Compare::Value(std::string key, Result r, std::string v) {
  Compare c = MakeCompare(Target::kValue, std::move(key), r);
  c.value = std::move(v);
  return c;
}
Compare Compare::Lease(std::string key, Result r, int64_t lease) {
  Compare c = MakeCompare(Target::kLease, std::move(key), r);
  c.number = lease;
  return c;
}

Op Op::Get(std::string key, GetOptions options) {
  Op op;
  op.kind = Kind::kGet;
  op.key = std::move(key);
  op.get = options;
  op.prefix = options.prefix;
  return op;
}
Op Op::Put(std::string key, std::string value, int64_t lease) {
  Op op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}
Op Op::Delete(std::string key, bool prefix) {
  Op op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.prefix = prefix;
  return op;
}
Op Op::Nested(Txn txn) {
  Op op;
  op.kind = Kind::kTxn;
  op.txn = std::make_shared<Txn>(std::move(txn));
  return op;
}

}  // namespace tessera::etcd
