// Plain value types for Tessera's etcd client: key-values, range options, transactions and
// their results. No gRPC or protobuf here, so callers of the client stay light.
// Values only; thread-safe as values are.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::etcd {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // revision that created the key: a member's "epoch"
  int64_t mod_revision = 0;     // revision of the last change
  int64_t version = 0;          // number of changes since creation (0: absent)
  int64_t lease = 0;            // attached lease id, 0 if none
};

// The end of the key range that holds every key starting with `prefix`.
std::string PrefixEnd(const std::string& prefix);

struct GetOptions {
  bool prefix = false;   // every key starting with the key
  int64_t revision = 0;  // read at this revision (0: latest)
  int64_t limit = 0;     // at most this many keys (0: no limit)
  bool keys_only = false;
  bool count_only = false;
  enum class Sort { kNone, kKeyAscend, kCreateAscend, kCreateDescend };
  Sort sort = Sort::kNone;
  int64_t max_create_revision = 0;  // only keys created at or before this revision (0: any)
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // store revision the read was served at
  bool more = false;     // more keys matched than `limit`
  int64_t count = 0;     // number of keys in the range
};

// One condition of a transaction.
struct Compare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue, kLease };
  enum class Result { kEqual, kGreater, kLess, kNotEqual };
  Target target = Target::kVersion;
  Result result = Result::kEqual;
  std::string key;
  std::string range_end;  // compare every key in [key, range_end) when non-empty
  int64_t number = 0;     // for every target but kValue
  std::string value;      // for kValue

  static Compare Version(std::string key, Result r, int64_t v);
  static Compare CreateRevision(std::string key, Result r, int64_t v);
  static Compare ModRevision(std::string key, Result r, int64_t v);
  static Compare Value(std::string key, Result r, std::string v);
  static Compare Lease(std::string key, Result r, int64_t lease);
  // True when the key does not exist (its create revision is 0).
  static Compare Absent(std::string key) { return CreateRevision(std::move(key), Result::kEqual, 0); }
};

struct Txn;

// One operation of a transaction: get, put, delete or a nested transaction.
struct Op {
  enum class Kind { kGet, kPut, kDelete, kTxn };
  Kind kind = Kind::kGet;
  std::string key;
  std::string value;         // kPut
  int64_t lease = 0;         // kPut
  bool prefix = false;       // kGet, kDelete
  GetOptions get;            // kGet
  std::shared_ptr<Txn> txn;  // kTxn

  static Op Get(std::string key, GetOptions options = {});
  static Op Put(std::string key, std::string value, int64_t lease = 0);
  static Op Delete(std::string key, bool prefix = false);
  static Op Nested(Txn txn);
};

// If every compare holds, `success` runs; otherwise `failure` runs. Atomic.
struct Txn {
  std::vector<Compare> compares;
  std::vector<Op> success;
  std::vector<Op> failure;
};

struct TxnResult;

// The result of one Op, in the same position as the Op.
struct OpResult {
  Op::Kind kind = Op::Kind::kGet;
  RangeResult range;               // kGet
  int64_t deleted = 0;             // kDelete
  std::shared_ptr<TxnResult> txn;  // kTxn
};

struct TxnResult {
  bool succeeded = false;  // whether the compares held
  int64_t revision = 0;    // store revision after the transaction
  std::vector<OpResult> results;
};

}  // namespace tessera::etcd
