// Internal to src/coord: the parts of EtcdClient that the watch and lease keep-alive streams
// share (channels, stubs, auth token, endpoint rotation, interruptible sleeps), and the
// conversions between etcd's protobuf messages and Tessera's plain types.
// Only etcd_client.cc, etcd_watch.cc and lease_keeper.cc include this.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coord/etcd_client.h"
#include "etcd/rpc.grpc.pb.h"

namespace tessera::etcd {

struct Endpoint {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  std::unique_ptr<etcdserverpb::Auth::Stub> auth;
};

struct EtcdClient::Impl {
  EtcdOptions options;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::atomic<size_t> current{0};
  std::atomic<bool> shutdown{false};

  std::mutex mu;  // guards token, and is the lock for `wake`
  std::string token;
  std::condition_variable wake;  // notified on Shutdown()

  // The endpoint streams and calls should use now.
  Endpoint& Current(size_t* index);
  // Waits (up to `max_wait`) for the endpoint's channel to be connected, driving the connection
  // from this thread. The sync gRPC API only polls a channel while a call is blocked on it, so a
  // channel that failed once would otherwise reconnect only on gRPC's 5 s backup poll.
  bool EnsureConnected(Endpoint& ep, std::chrono::milliseconds max_wait);
  // Moves on to the next endpoint after a failure on endpoint `index`.
  void Rotate(size_t index);
  // Adds the auth token (authenticating first if needed) and returns false if auth failed.
  Status PrepareContext(grpc::ClientContext* ctx, Endpoint& ep);
  Status Authenticate(Endpoint& ep);
  void InvalidateToken();
  // Sleeps up to `d`; returns false at once if the client shuts down.
  bool SleepFor(std::chrono::milliseconds d);
};

// True for gRPC errors worth retrying on another endpoint or after a pause.
bool IsTransient(const grpc::Status& s);
// True when etcd rejected the auth token (expired or unknown).
bool IsAuthTokenError(const grpc::Status& s);
Status FromGrpc(const grpc::Status& s, const std::string& what, const std::string& endpoint);

KeyValue FromProto(const mvccpb::KeyValue& kv);
void ToProto(const std::string& key, const GetOptions& o, etcdserverpb::RangeRequest* req);
RangeResult FromProto(const etcdserverpb::RangeResponse& resp);
void ToProto(const Txn& txn, etcdserverpb::TxnRequest* req);
TxnResult FromProto(const etcdserverpb::TxnResponse& resp);

}  // namespace tessera::etcd
