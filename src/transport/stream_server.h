// StreamServer: the server side shared by the TCP and shared-memory transports. It accepts
// connections on a listening stream socket and runs one thread per connection that reads a
// request through the transport's MessageChannel, passes it to the handler, waits for the reply
// (sent from any thread through a Responder) while watching for the peer going away, and writes
// it. Replies never block the thread that sends them: they are handed to the connection's
// thread. Bad frames close the connection with one log line naming the peer.
//
// Used only by the transports' own files. Thread-safe: Start/Shutdown from one owner thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/stream_io.h"
#include "transport/transport.h"

namespace tessera {

// How one transport moves messages over an accepted connection. Called only from that
// connection's thread, except ReplyBuffer (also from the thread holding the Responder, while the
// connection's thread waits for the reply).
class MessageChannel {
 public:
  virtual ~MessageChannel() = default;
  virtual int fd() const = 0;
  // Opens the exchange before the first request: checks the peer if the transport does, and
  // sends the greeting (frame.h). An error closes the connection (PermissionDenied: a peer of
  // another user, counted as refused).
  virtual Status Open(const Deadline& deadline) = 0;
  // Reads the next request; the views stay valid until the next ReadRequest. Cancelled when the
  // peer closed cleanly between messages; Unauthenticated (with *id set) when its job MAC does
  // not check, before its payload is read; another error (with what was wrong) otherwise. A
  // channel that reads a payload a receive at a time tells `handler`'s watcher (Watch) of it.
  virtual Status ReadRequest(uint64_t* id, std::string_view* header, ConstBuffer* payload,
                             RequestHandler* handler) = 0;
  // Tells the peer its request `id` was refused (a refusal frame, frame_auth.h), best effort.
  virtual void WriteRefusal(uint64_t id) = 0;
  // Reusable memory for a reply payload of `bytes`.
  virtual MutableBuffer ReplyBuffer(size_t bytes) = 0;
  // Writes a reply: `header` and the first `payload_bytes` of the reply buffer, made by `filler`
  // (if any) as it is written: a run at a time, or all of it first.
  virtual Status WriteReply(uint64_t id, std::string_view header, size_t payload_bytes,
                            const Deadline& deadline, PayloadFiller* filler) = 0;
};

class StreamServer : public ServerTransport {
 public:
  explicit StreamServer(TransportOptions options) : options_(options) {}
  ~StreamServer() override;

  Status Start(const std::string& host, int port, RequestHandler* handler) override;
  int port() const override { return port_; }
  std::string endpoint() const override { return endpoint_; }
  void Shutdown() override;

  class Connection;

 protected:
  // Opens the listening socket; sets *port and *endpoint (what clients connect to).
  virtual StatusOr<UniqueFd> Listen(const std::string& host, int port, int* bound_port,
                                    std::string* endpoint) = 0;
  virtual std::unique_ptr<MessageChannel> NewChannel(UniqueFd fd) = 0;
  const TransportOptions& options() const { return options_; }

 private:
  void AcceptLoop();
  void Reap(bool all);

  TransportOptions options_;
  RequestHandler* handler_ = nullptr;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // eventfd: wakes the accept loop at shutdown
  int port_ = 0;
  std::string endpoint_;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;  // guards conns_
  struct Entry {
    std::shared_ptr<Connection> conn;
    std::thread thread;
  };
  std::vector<Entry> conns_;
  bool refused_logged_ = false;
};

}  // namespace tessera
