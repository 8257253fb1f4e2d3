// EtcdClient: unary calls with failover and retry (see etcd_client.h).
#include "coord/etcd_client.h"

#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/net.h"
#include "common/strings.h"
#include "coord/connection_sharing.h"
#include "coord/etcd_internal.h"
#include "coord/etcd_watch.h"

namespace tessera::etcd {
namespace {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, int64_t connection_group,
                                           std::shared_ptr<grpc::ChannelCredentials> creds) {
  grpc::ChannelArguments args;
  // Reconnect quickly after an etcd restart; gRPC's default backoff grows to two minutes.
  // (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is left alone: gRPC also uses it as the minimum connect
  // timeout, and a small value abandons connections before etcd's first SETTINGS frame.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Notice dead connections (a partition leaves no RST) on long-lived streams. etcd refuses
  // pings more often than every 5 s (--grpc-keepalive-min-time).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  // etcd refuses pings on a connection without an active call (GOAWAY "too_many_pings").
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // this client retries itself, across endpoints
  args.SetMaxReceiveMessageSize(64 << 20);
  // A connection of its own, as the client's own process would have (or its group's, in a
  // simulation of many processes in one).
  ApplyConnectionGroup(&args, connection_group);
  return grpc::CreateCustomChannel(address, creds, args);
}

}  // namespace

// ---- Impl ----------------------------------------------------------------------------------

Endpoint& EtcdClient::Impl::Current(size_t* index) {
  size_t i = current.load() % endpoints.size();
  if (index) *index = i;
  return *endpoints[i];
}

bool EtcdClient::Impl::EnsureConnected(Endpoint& ep, std::chrono::milliseconds max_wait) {
  if (ep.channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) return true;
  return ep.channel->WaitForConnected(std::chrono::system_clock::now() + max_wait);
}

void EtcdClient::Impl::Rotate(size_t index) {
  size_t expected = index;
  current.compare_exchange_strong(expected, (index + 1) % endpoints.size());
}

Status EtcdClient::Impl::Authenticate(Endpoint& ep) {
  etcdserverpb::AuthenticateRequest req;
  req.set_name(options.username);
  req.set_password(options.password);
  etcdserverpb::AuthenticateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options.request_timeout);
  grpc::Status s = ep.auth->Authenticate(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s, "authenticate as '" + options.username + "'", ep.address);
  std::lock_guard<std::mutex> lock(mu);
  token = resp.token();
  return Status::OK();
}

void EtcdClient::Impl::InvalidateToken() {
  std::lock_guard<std::mutex> lock(mu);
  token.clear();
}

Status EtcdClient::Impl::PrepareContext(grpc::ClientContext* ctx, Endpoint& ep) {
  if (options.username.empty()) return Status::OK();
  std::string t;
  {
    std::lock_guard<std::mutex> lock(mu);
    t = token;
  }
  if (t.empty()) {
    TESSERA_RETURN_IF_ERROR(Authenticate(ep));
    std::lock_guard<std::mutex> lock(mu);
    t = token;
  }
  ctx->AddMetadata("token", t);
  return Status::OK();
}

bool EtcdClient::Impl::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu);
  wake.wait_for(lock, d, [&] { return shutdown.load(); });
  return !shutdown.load();
}

// ---- Unary calls with retry ---------------------------------------------------------------

namespace {

// How long one attempt waits for a disconnected endpoint to connect before trying the next.
constexpr std::chrono::milliseconds kConnectWait{1000};

template <typename Req, typename Resp, typename Fn>
Status CallWithRetry(EtcdClient::Impl& impl, const std::string& what, const Req& req, Resp* resp,
                     const CallOptions& call, Fn fn) {
  auto retry = call.retry_timeout.count() >= 0 ? call.retry_timeout : impl.options.retry_timeout;
  Deadline deadline(retry);
  Backoff backoff({std::chrono::milliseconds(50), std::chrono::milliseconds(1000), 2.0, 0.2});
  std::string last_detail;
  int auth_retries = 0;
  std::vector<std::string> tried;
  while (true) {
    if (impl.shutdown.load()) return Status::Cancelled("etcd client is shutting down (" + what + ")");
    size_t index = 0;
    Endpoint& ep = impl.Current(&index);
    auto attempt = std::min<std::chrono::milliseconds>(
        impl.options.request_timeout, std::max(deadline.remaining(), std::chrono::milliseconds(1)));
    if (impl.EnsureConnected(ep, std::min(attempt, kConnectWait))) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + attempt);
      Status prep = impl.PrepareContext(&ctx, ep);
      if (prep.ok()) {
        grpc::Status s = fn(ep, &ctx, req, resp);
        if (s.ok()) return Status::OK();
        if (IsAuthTokenError(s) && !impl.options.username.empty() && auth_retries++ < 3) {
          impl.InvalidateToken();
          continue;
        }
        last_detail = s.error_message();
        if (!IsTransient(s)) return FromGrpc(s, what, ep.address);
      } else {
        last_detail = prep.message();
        if (prep.code() != StatusCode::kUnavailable && prep.code() != StatusCode::kDeadlineExceeded)
          return prep;
      }
    } else {
      last_detail = "could not connect (connection refused or timed out)";
    }
    if (std::find(tried.begin(), tried.end(), ep.address) == tried.end()) tried.push_back(ep.address);
    impl.Rotate(index);
    if (deadline.expired()) break;
    auto pause = std::min(backoff.Next(), deadline.remaining());
    if (!impl.SleepFor(pause)) return Status::Cancelled("etcd client is shutting down (" + what + ")");
    if (deadline.expired()) break;
  }
  double secs = std::chrono::duration<double>(retry).count();
  return Status(StatusCode::kUnavailable, "cannot reach etcd at " + Join(tried, ",") + " (" + what +
                                              "; retried for " + fmt::format("{:.1f}", secs) +
                                              " s): " + last_detail);
}

}  // namespace

// ---- EtcdClient -------------------------------------------------------------------------------

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdClient::~EtcdClient() { Shutdown(); }

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdOptions options) {
  if (options.endpoints.empty()) return Status::InvalidArgument("no etcd endpoint given");
  for (const auto& e : options.endpoints) {
    auto hp = ParseHostPort(e);
    if (!hp.ok()) return hp.status().WithContext("etcd endpoint");
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      TESSERA_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(options.ca_file));
    }
    if (!options.cert_file.empty()) {
      TESSERA_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile(options.cert_file));
    }
    if (!options.key_file.empty()) {
      TESSERA_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile(options.key_file));
    }
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const int64_t group = NextConnectionGroup();
  for (const auto& address : options.endpoints) {
    auto ep = std::make_unique<Endpoint>();
    ep->address = address;
    ep->channel = MakeChannel(address, group, creds);
    ep->kv = etcdserverpb::KV::NewStub(ep->channel);
    ep->watch = etcdserverpb::Watch::NewStub(ep->channel);
    ep->lease = etcdserverpb::Lease::NewStub(ep->channel);
    ep->maintenance = etcdserverpb::Maintenance::NewStub(ep->channel);
    ep->auth = etcdserverpb::Auth::NewStub(ep->channel);
    impl->endpoints.push_back(std::move(ep));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(impl)));
}

Status EtcdClient::CheckReachable(std::chrono::milliseconds timeout) {
  std::vector<std::string> reasons;
  for (const auto& ep : impl_->options.endpoints) {
    Status s = ProbeTcp(ep, timeout);
    if (s.ok()) return s;
    reasons.push_back(ep + ": " + s.message());
  }
  return Status::Unavailable("cannot reach etcd at " + Join(reasons, "; ") +
                             " (is etcd running there? check --etcd / TESSERA_ETCD)");
}

StatusOr<ServerStatus> EtcdClient::Ping(std::chrono::milliseconds timeout) {
  etcdserverpb::StatusRequest req;
  etcdserverpb::StatusResponse resp;
  std::string address;
  CallOptions call;
  call.retry_timeout = timeout;
  Status s = CallWithRetry(*impl_, "status", req, &resp, call,
                           [&](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) {
                             address = ep.address;
                             return ep.maintenance->Status(ctx, r, o);
                           });
  if (!s.ok()) return s;
  ServerStatus out;
  out.version = resp.version();
  out.revision = resp.header().revision();
  out.leader = resp.leader();
  out.endpoint = address;
  return out;
}

StatusOr<RangeResult> EtcdClient::Get(const std::string& key, const GetOptions& options,
                                      const CallOptions& call) {
  etcdserverpb::RangeRequest req;
  ToProto(key, options, &req);
  etcdserverpb::RangeResponse resp;
  Status s = CallWithRetry(
      *impl_, "get " + key, req, &resp, call,
      [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) { return ep.kv->Range(ctx, r, o); });
  if (!s.ok()) return s;
  return FromProto(resp);
}

StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease,
                                  const CallOptions& call) {
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  Status s = CallWithRetry(
      *impl_, "put " + key, req, &resp, call,
      [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) { return ep.kv->Put(ctx, r, o); });
  if (!s.ok()) return s;
  return resp.header().revision();
}

StatusOr<int64_t> EtcdClient::Delete(const std::string& key, bool prefix, const CallOptions& call) {
  etcdserverpb::DeleteRangeRequest req;
  req.set_key(key);
  if (prefix) req.set_range_end(PrefixEnd(key));
  etcdserverpb::DeleteRangeResponse resp;
  Status s = CallWithRetry(*impl_, "delete " + key, req, &resp, call,
                           [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) {
                             return ep.kv->DeleteRange(ctx, r, o);
                           });
  if (!s.ok()) return s;
  return resp.deleted();
}

StatusOr<TxnResult> EtcdClient::Commit(const Txn& txn, const CallOptions& call) {
  etcdserverpb::TxnRequest req;
  ToProto(txn, &req);
  etcdserverpb::TxnResponse resp;
  std::string what = "txn";
  if (!txn.compares.empty()) what += " on " + txn.compares.front().key;
  Status s = CallWithRetry(
      *impl_, what, req, &resp, call,
      [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) { return ep.kv->Txn(ctx, r, o); });
  if (!s.ok()) return s;
  return FromProto(resp);
}

Status EtcdClient::Compact(int64_t revision) {
  etcdserverpb::CompactionRequest req;
  req.set_revision(revision);
  etcdserverpb::CompactionResponse resp;
  return CallWithRetry(*impl_, "compact", req, &resp, CallOptions{},
                       [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) {
                         return ep.kv->Compact(ctx, r, o);
                       });
}

namespace {

// One Auth-service call: `rpc` is the stub's method.
template <typename Req, typename Resp>
Status AuthCall(EtcdClient::Impl& impl, const std::string& what, const Req& req,
                grpc::Status (etcdserverpb::Auth::Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*)) {
  Resp resp;
  return CallWithRetry(impl, what, req, &resp, CallOptions{},
                       [rpc](Endpoint& ep, grpc::ClientContext* ctx, const Req& r, Resp* o) {
                         return ((*ep.auth).*rpc)(ctx, r, o);
                       });
}

}  // namespace

Status EtcdClient::AuthEnable() {
  return AuthCall(*impl_, "enable authentication", etcdserverpb::AuthEnableRequest(),
                  &etcdserverpb::Auth::Stub::AuthEnable);
}

Status EtcdClient::UserAdd(const std::string& name, const std::string& password) {
  etcdserverpb::AuthUserAddRequest req;
  req.set_name(name);
  req.set_password(password);
  return AuthCall(*impl_, "add user '" + name + "'", req, &etcdserverpb::Auth::Stub::UserAdd);
}

Status EtcdClient::UserDelete(const std::string& name) {
  etcdserverpb::AuthUserDeleteRequest req;
  req.set_name(name);
  return AuthCall(*impl_, "delete user '" + name + "'", req, &etcdserverpb::Auth::Stub::UserDelete);
}

Status EtcdClient::UserGrantRole(const std::string& user, const std::string& role) {
  etcdserverpb::AuthUserGrantRoleRequest req;
  req.set_user(user);
  req.set_role(role);
  return AuthCall(*impl_, "grant role '" + role + "' to '" + user + "'", req,
                  &etcdserverpb::Auth::Stub::UserGrantRole);
}

Status EtcdClient::RoleAdd(const std::string& name) {
  etcdserverpb::AuthRoleAddRequest req;
  req.set_name(name);
  return AuthCall(*impl_, "add role '" + name + "'", req, &etcdserverpb::Auth::Stub::RoleAdd);
}

Status EtcdClient::RoleDelete(const std::string& name) {
  etcdserverpb::AuthRoleDeleteRequest req;
  req.set_role(name);
  return AuthCall(*impl_, "delete role '" + name + "'", req, &etcdserverpb::Auth::Stub::RoleDelete);
}

Status EtcdClient::RoleGrantPrefix(const std::string& role, const std::string& prefix) {
  etcdserverpb::AuthRoleGrantPermissionRequest req;
  req.set_name(role);
  auto* p = req.mutable_perm();
  p->set_permtype(etcdserverpb::Permission::READWRITE);
  p->set_key(prefix);
  p->set_range_end(PrefixEnd(prefix));
  return AuthCall(*impl_, "grant '" + role + "' the keys under " + prefix, req,
                  &etcdserverpb::Auth::Stub::RoleGrantPermission);
}

StatusOr<LeaseGrant> EtcdClient::GrantLease(int64_t ttl_seconds, const CallOptions& call) {
  if (ttl_seconds < 1) return Status::InvalidArgument("lease TTL must be at least 1 s");
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse resp;
  Status s = CallWithRetry(*impl_, "grant lease", req, &resp, call,
                           [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) {
                             return ep.lease->LeaseGrant(ctx, r, o);
                           });
  if (!s.ok()) return s;
  if (!resp.error().empty()) return Status::Unavailable("etcd: grant lease: " + resp.error());
  return LeaseGrant{resp.id(), resp.ttl()};
}

Status EtcdClient::RevokeLease(int64_t id, const CallOptions& call) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(id);
  etcdserverpb::LeaseRevokeResponse resp;
  Status s = CallWithRetry(*impl_, fmt::format("revoke lease {:x}", id), req, &resp, call,
                           [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) {
                             return ep.lease->LeaseRevoke(ctx, r, o);
                           });
  return s;
}

StatusOr<LeaseInfo> EtcdClient::LeaseTimeToLive(int64_t id, bool with_keys, const CallOptions& call) {
  etcdserverpb::LeaseTimeToLiveRequest req;
  req.set_id(id);
  req.set_keys(with_keys);
  etcdserverpb::LeaseTimeToLiveResponse resp;
  Status s = CallWithRetry(*impl_, fmt::format("lease {:x} time-to-live", id), req, &resp, call,
                           [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) {
                             return ep.lease->LeaseTimeToLive(ctx, r, o);
                           });
  if (!s.ok()) return s;
  LeaseInfo info;
  info.id = resp.id();
  info.ttl_seconds = resp.ttl();
  info.granted_ttl_seconds = resp.grantedttl();
  for (const auto& k : resp.keys()) info.keys.push_back(k);
  return info;
}

StatusOr<std::vector<int64_t>> EtcdClient::ListLeases(const CallOptions& call) {
  etcdserverpb::LeaseLeasesRequest req;
  etcdserverpb::LeaseLeasesResponse resp;
  Status s = CallWithRetry(*impl_, "list leases", req, &resp, call,
                           [](Endpoint& ep, grpc::ClientContext* ctx, const auto& r, auto* o) {
                             return ep.lease->LeaseLeases(ctx, r, o);
                           });
  if (!s.ok()) return s;
  std::vector<int64_t> ids;
  for (const auto& l : resp.leases()) ids.push_back(l.id());
  return ids;
}

std::unique_ptr<Watcher> EtcdClient::Watch(const std::string& key, const WatchOptions& options,
                                           std::function<void(const WatchUpdate&)> callback) {
  return std::unique_ptr<Watcher>(new Watcher(this, key, options, std::move(callback)));
}

void EtcdClient::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->shutdown = true;
  }
  impl_->wake.notify_all();
}

bool EtcdClient::shut_down() const { return impl_->shutdown.load(); }

std::string EtcdClient::endpoints() const { return Join(impl_->options.endpoints, ","); }
const EtcdOptions& EtcdClient::options() const { return impl_->options; }

}  // namespace tessera::etcd
