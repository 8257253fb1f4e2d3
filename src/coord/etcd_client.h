// EtcdClient: Tessera's client for etcd's v3 gRPC API (KV, Txn, Lease, Watch), written against
// the public protocol definitions in proto/etcd/.
//
// Failover and retry: the client holds a channel to each endpoint. A call that fails with a
// transient error (the endpoint is down, restarting, has no leader, or did not answer within
// `request_timeout`) moves to the next endpoint and is retried with jittered backoff until
// `retry_timeout` passes; gRPC reconnects underneath (its reconnect backoff is capped at 1 s),
// so nothing is torn down when etcd restarts. Because a mutation whose reply was lost may be
// retried, callers that need exactly-once effects make their transactions idempotent (compare
// on their own lease or value) or verify afterwards; Registry and Election do.
//
// Auth: with a username, the client authenticates and attaches the token to each call, and
// re-authenticates when etcd says the token is invalid. TLS: optional, with CA and client cert.
//
// Thread-safety: every method may be called from any thread. Shutdown() makes calls that are
// waiting to retry return Cancelled; use it before destroying objects that block on etcd.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coord/etcd_types.h"
#include "tessera/status.h"

namespace tessera::etcd {

struct EtcdOptions {
  std::vector<std::string> endpoints;               // host:port of each etcd member; required
  std::chrono::milliseconds request_timeout{5000};  // deadline of one attempt
  std::chrono::milliseconds retry_timeout{20000};   // how long one call keeps retrying
  std::string username;                             // empty: no authentication
  std::string password;
  bool tls = false;       // https endpoints
  std::string ca_file;    // PEM roots (empty: system roots)
  std::string cert_file;  // PEM client certificate (optional)
  std::string key_file;   // PEM client key (optional)
};

// Per-call overrides.
struct CallOptions {
  std::chrono::milliseconds retry_timeout{-1};  // <0: use EtcdOptions::retry_timeout
};

struct LeaseGrant {
  int64_t id = 0;
  int64_t ttl_seconds = 0;
};

struct LeaseInfo {
  int64_t id = 0;
  int64_t ttl_seconds = -1;  // remaining; -1 when the lease does not exist
  int64_t granted_ttl_seconds = 0;
  std::vector<std::string> keys;
};

struct ServerStatus {
  std::string version;
  int64_t revision = 0;
  uint64_t leader = 0;
  std::string endpoint;
};

class Watcher;
struct WatchOptions;
struct WatchUpdate;

class EtcdClient {
 public:
  // Creates a client; does not contact etcd (see Ping()). Fails only on bad options.
  static StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Asks some endpoint for its status, retrying for `timeout`.
  StatusOr<ServerStatus> Ping(std::chrono::milliseconds timeout);

  // Whether any endpoint accepts connections, within `timeout` (no retries): for a command that
  // should fail at once, saying why, when etcd is not there. Unavailable names every endpoint
  // and its reason (an unknown host is not a refused connection).
  Status CheckReachable(std::chrono::milliseconds timeout);

  StatusOr<RangeResult> Get(const std::string& key, const GetOptions& options = {},
                            const CallOptions& call = {});
  // Returns the store revision after the put.
  StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0,
                        const CallOptions& call = {});
  // Returns the number of keys deleted.
  StatusOr<int64_t> Delete(const std::string& key, bool prefix = false, const CallOptions& call = {});
  StatusOr<TxnResult> Commit(const Txn& txn, const CallOptions& call = {});
  // Compacts history up to `revision` (watches from before it can no longer resume).
  Status Compact(int64_t revision);

  StatusOr<LeaseGrant> GrantLease(int64_t ttl_seconds, const CallOptions& call = {});
  Status RevokeLease(int64_t id, const CallOptions& call = {});
  StatusOr<LeaseInfo> LeaseTimeToLive(int64_t id, bool with_keys = false, const CallOptions& call = {});
  // Every lease etcd holds now (their ids).
  StatusOr<std::vector<int64_t>> ListLeases(const CallOptions& call = {});

  // Starts a watch (see etcd_watch.h). The callback runs on the watcher's own thread.
  std::unique_ptr<Watcher> Watch(const std::string& key, const WatchOptions& options,
                                 std::function<void(const WatchUpdate&)> callback);

  // Authentication administration (etcd's Auth service; the caller must have the root role,
  // except for AuthEnable, which needs the root user to exist). Each is one call, retried as
  // the others; AlreadyExists / NotFound come back as etcd says them.
  Status AuthEnable();
  Status UserAdd(const std::string& name, const std::string& password);
  Status UserDelete(const std::string& name);
  Status UserGrantRole(const std::string& user, const std::string& role);
  Status RoleAdd(const std::string& name);
  Status RoleDelete(const std::string& name);
  // Read and write on every key under `prefix`.
  Status RoleGrantPrefix(const std::string& role, const std::string& prefix);

  // Makes calls waiting to retry, and later calls, fail with Cancelled.
  void Shutdown();
  bool shut_down() const;

  // Endpoints as given ("host:port,...").
  std::string endpoints() const;
  const EtcdOptions& options() const;

  // Internal: shared with the watch and keep-alive streams (coord/etcd_internal.h).
  struct Impl;
  Impl* impl() { return impl_.get(); }

 private:
  explicit EtcdClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::etcd
