// gRPC data-plane transport (see grpc_transport.h).
#include "transport/grpc_transport.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>

#include "common/clock.h"
#include "security/grpc_tls.h"
#include "security/rpc_auth.h"
#include "tessera/data.grpc.pb.h"

namespace tessera {
namespace {

constexpr int kMaxMessage = INT32_MAX;
// What the job tokens of a data-plane call and of its reply are bound to (with the header).
constexpr char kRequestMethod[] = "DataPlane/Call";
constexpr char kReplyMethod[] = "DataPlane/Reply";

std::string MetadataValue(const std::multimap<grpc::string_ref, grpc::string_ref>& md) {
  auto it = md.find(security::kRpcAuthMetadata);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

// Answers one RPC. Finish() is called exactly once: by Send, or by the destructor with an error
// if the handler dropped the responder without sending.
class GrpcResponder : public Responder {
 public:
  GrpcResponder(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor, wire::Frame* reply,
                const security::RpcAuth* auth)
      : ctx_(ctx), reactor_(reactor), reply_(reply), auth_(auth) {}
  ~GrpcResponder() override {
    if (!sent_) reactor_->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "pserver dropped the request"));
  }
  MutableBuffer Allocate(size_t bytes) override {
    std::string* p = reply_->mutable_payload();
    p->resize(bytes);
    return {p->data(), bytes};
  }
  void Send(std::string_view header, std::span<const ConstBuffer> payload) override {
    if (sent_) return;
    sent_ = true;
    reply_->set_header(std::string(header));
    if (auth_)
      ctx_->AddInitialMetadata(security::kRpcAuthMetadata, auth_->Token(kReplyMethod, header, WallMillis()));
    std::string* p = reply_->mutable_payload();
    if (payload.size() == 1 && payload[0].data == p->data() && payload[0].size <= p->size()) {
      p->resize(payload[0].size);  // built in place by Allocate (a reply may use less of it)
      reactor_->Finish(grpc::Status::OK);
      return;
    }
    p->resize(TotalSize(payload));
    GatherInto(payload, p->data());
    reactor_->Finish(grpc::Status::OK);
  }

 private:
  grpc::CallbackServerContext* ctx_;
  grpc::ServerUnaryReactor* reactor_;
  wire::Frame* reply_;
  const security::RpcAuth* auth_;
  bool sent_ = false;
};

class DataPlaneService final : public wire::DataPlane::CallbackService {
 public:
  DataPlaneService(RequestHandler* handler, const TransportOptions& options)
      : handler_(handler), refused_(options.auth_refused) {
    if (!options.secret.empty()) auth_.emplace(options.secret);
  }
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const wire::Frame* request,
                                 wire::Frame* reply) override {
    auto* reactor = ctx->DefaultReactor();
    if (auth_) {
      Status s = auth_->Check(MetadataValue(ctx->client_metadata()), kRequestMethod, request->header(),
                              WallMillis());
      if (!s.ok()) {
        // Refused before the request is looked at.
        if (refused_) refused_->Add();
        spdlog::warn("grpc data plane: refused a call from {}: {}", ctx->peer(), s.message());
        reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, s.message()));
        return reactor;
      }
    }
    handler_->Handle(request->header(), ConstBuffer{request->payload().data(), request->payload().size()},
                     std::make_unique<GrpcResponder>(ctx, reactor, reply, auth_ ? &*auth_ : nullptr));
    return reactor;
  }

 private:
  RequestHandler* handler_;
  std::optional<security::RpcAuth> auth_;
  metrics::Counter* refused_;
};

class GrpcServerTransport : public ServerTransport {
 public:
  explicit GrpcServerTransport(const TransportOptions& options) : options_(options) {}
  ~GrpcServerTransport() override { Shutdown(); }
  Status Start(const std::string& host, int port, RequestHandler* handler) override {
    service_ = std::make_unique<DataPlaneService>(handler, options_);
    grpc::ServerBuilder b;
    b.AddListeningPort(host + ":" + std::to_string(port), security::GrpcServerCredentials(options_.tls.get()),
                       &port_);
    b.RegisterService(service_.get());
    b.SetMaxReceiveMessageSize(kMaxMessage);
    b.SetMaxSendMessageSize(kMaxMessage);
    server_ = b.BuildAndStart();
    if (!server_ || port_ == 0) {
      return Status::Unavailable("cannot listen on " + host + ":" + std::to_string(port) +
                                 " (address in use or not available)");
    }
    endpoint_ = host + ":" + std::to_string(port_);
    return Status::OK();
  }
  int port() const override { return port_; }
  std::string endpoint() const override { return endpoint_; }
  std::string name() const override { return "grpc"; }
  void Shutdown() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      server_.reset();
    }
  }

 private:
  TransportOptions options_;
  std::mutex mu_;
  std::unique_ptr<DataPlaneService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string endpoint_;
};

class GrpcConnection : public ClientConnection {
 public:
  GrpcConnection(std::string address, const TransportOptions& options) : address_(std::move(address)) {
    if (!options.secret.empty()) auth_.emplace(options.secret);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessage);
    args.SetMaxSendMessageSize(kMaxMessage);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    security::AddGrpcTlsArgs(&args, options.tls.get());
    channel_ = grpc::CreateCustomChannel(address_, security::GrpcChannelCredentials(options.tls.get()), args);
    stub_ = wire::DataPlane::NewStub(channel_);
  }

  StatusOr<CallResult> Call(std::string_view header, std::span<const ConstBuffer> payload,
                            std::span<const MutableBuffer> reply_buffers,
                            std::chrono::milliseconds timeout) override {
    // The sync API only drives a connection while a call waits on it: connect explicitly.
    if (channel_->GetState(true) != GRPC_CHANNEL_READY &&
        !channel_->WaitForConnected(std::chrono::system_clock::now() +
                                    std::min(timeout, std::chrono::milliseconds(1000)))) {
      return Status::Unavailable("cannot connect to pserver at " + address_);
    }
    FillWhole(payload);
    wire::Frame req;
    req.set_header(std::string(header));
    std::string* p = req.mutable_payload();
    p->resize(TotalSize(payload));
    GatherInto(payload, p->data());
    wire::Frame& reply = reply_;
    reply.Clear();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    if (auth_)
      ctx.AddMetadata(security::kRpcAuthMetadata, auth_->Token(kRequestMethod, header, WallMillis()));
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      if (aborted_) return Abandoned();
      active_ = &ctx;
    }
    grpc::Status s = stub_->Call(&ctx, req, &reply);
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      active_ = nullptr;
      if (aborted_) return Abandoned();
    }
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return Status::Unauthenticated("pserver " + address_ +
                                     " (grpc) refused this process's job credentials: " + s.error_message());
    }
    if (!s.ok()) {
      auto code = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? StatusCode::kDeadlineExceeded
                                                                        : StatusCode::kUnavailable;
      return Status(code, "pserver " + address_ + ": " + s.error_message());
    }
    if (auth_) {
      Status a = auth_->Check(MetadataValue(ctx.GetServerInitialMetadata()), kReplyMethod, reply.header(),
                              WallMillis());
      if (!a.ok()) {
        return Status::Unauthenticated("the reply from " + address_ +
                                       " (grpc) does not carry this job's token (" + a.message() +
                                       "): it is not a pserver of this job");
      }
    }
    CallResult out;
    out.header = reply.header();
    const std::string& rp = reply.payload();
    out.payload_bytes = rp.size();
    if (rp.size() > TotalSize(reply_buffers)) {
      return Status::DataLoss("pserver " + address_ + " replied with " + std::to_string(rp.size()) +
                              " payload bytes, more than the " + std::to_string(TotalSize(reply_buffers)) +
                              " expected");
    }
    size_t o = 0;
    for (const auto& b : reply_buffers) {
      if (o >= rp.size()) break;
      size_t n = std::min(b.size, rp.size() - o);
      std::memcpy(b.data, rp.data() + o, n);
      o += n;
    }
    return out;
  }
  const std::string& address() const override { return address_; }
  void Abort() override {
    std::lock_guard<std::mutex> lock(abort_mu_);
    aborted_ = true;
    if (active_) active_->TryCancel();
  }

 private:
  Status Abandoned() const {
    return Status::Unavailable(
        "pserver " + address_ +
        " (grpc): call abandoned (the pserver was replaced or its registration is gone)");
  }

  std::string address_;
  std::optional<security::RpcAuth> auth_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<wire::DataPlane::Stub> stub_;
  wire::Frame reply_;    // the last reply (CallResult::header points into it)
  std::mutex abort_mu_;  // guards aborted_ and active_ (Abort comes from another thread)
  bool aborted_ = false;
  grpc::ClientContext* active_ = nullptr;  // the call in progress
};

}  // namespace

std::unique_ptr<ServerTransport> NewGrpcServerTransport(const TransportOptions& options) {
  return std::make_unique<GrpcServerTransport>(options);
}
std::unique_ptr<ClientConnection> NewGrpcConnection(const std::string& address,
                                                    const TransportOptions& options) {
  return std::make_unique<GrpcConnection>(address, options);
}

}  // namespace tessera
