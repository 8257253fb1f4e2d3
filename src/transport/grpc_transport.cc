// gRPC data-plane transport (see grpc_transport.h).
#include "transport/grpc_transport.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "tessera/data.grpc.pb.h"

namespace tessera {
namespace {

constexpr int kMaxMessage = INT32_MAX;

// Answers one RPC. Finish() is called exactly once: by Send, or by the destructor with an error
// if the handler dropped the responder without sending.
class GrpcResponder : public Responder {
 public:
  GrpcResponder(grpc::ServerUnaryReactor* reactor, wire::Frame* reply) : reactor_(reactor), reply_(reply) {}
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
    std::string* p = reply_->mutable_payload();
    if (payload.size() == 1 && payload[0].data == p->data() && payload[0].size == p->size()) {
      reactor_->Finish(grpc::Status::OK);  // built in place by Allocate
      return;
    }
    p->resize(TotalSize(payload));
    size_t off = 0;
    for (const auto& b : payload) {
      if (b.size) std::memcpy(p->data() + off, b.data, b.size);
      off += b.size;
    }
    reactor_->Finish(grpc::Status::OK);
  }

 private:
  grpc::ServerUnaryReactor* reactor_;
  wire::Frame* reply_;
  bool sent_ = false;
};

class DataPlaneService final : public wire::DataPlane::CallbackService {
 public:
  explicit DataPlaneService(RequestHandler* handler) : handler_(handler) {}
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const wire::Frame* request,
                                 wire::Frame* reply) override {
    auto* reactor = ctx->DefaultReactor();
    handler_->Handle(request->header(), ConstBuffer{request->payload().data(), request->payload().size()},
                     std::make_unique<GrpcResponder>(reactor, reply));
    return reactor;
  }

 private:
  RequestHandler* handler_;
};

class GrpcServerTransport : public ServerTransport {
 public:
  ~GrpcServerTransport() override { Shutdown(); }
  Status Start(const std::string& host, int port, RequestHandler* handler) override {
    service_ = std::make_unique<DataPlaneService>(handler);
    grpc::ServerBuilder b;
    b.AddListeningPort(host + ":" + std::to_string(port), grpc::InsecureServerCredentials(), &port_);
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
  std::mutex mu_;
  std::unique_ptr<DataPlaneService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string endpoint_;
};

class GrpcConnection : public ClientConnection {
 public:
  explicit GrpcConnection(std::string address) : address_(std::move(address)) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessage);
    args.SetMaxSendMessageSize(kMaxMessage);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
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
    wire::Frame req;
    req.set_header(std::string(header));
    std::string* p = req.mutable_payload();
    p->resize(TotalSize(payload));
    size_t off = 0;
    for (const auto& b : payload) {
      if (b.size) std::memcpy(p->data() + off, b.data, b.size);
      off += b.size;
    }
    wire::Frame& reply = reply_;
    reply.Clear();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
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
    if (!s.ok()) {
      auto code = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? StatusCode::kDeadlineExceeded
                                                                        : StatusCode::kUnavailable;
      return Status(code, "pserver " + address_ + ": " + s.error_message());
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
    return Status::Unavailable("pserver " + address_ +
                               " (grpc): call abandoned (the pserver was replaced or its registration is gone)");
  }

  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<wire::DataPlane::Stub> stub_;
  wire::Frame reply_;  // the last reply (CallResult::header points into it)
  std::mutex abort_mu_;  // guards aborted_ and active_ (Abort comes from another thread)
  bool aborted_ = false;
  grpc::ClientContext* active_ = nullptr;  // the call in progress
};

}  // namespace

std::unique_ptr<ServerTransport> NewGrpcServerTransport() { return std::make_unique<GrpcServerTransport>(); }
std::unique_ptr<ClientConnection> NewGrpcConnection(const std::string& address) {
  return std::make_unique<GrpcConnection>(address);
}

}  // namespace tessera
