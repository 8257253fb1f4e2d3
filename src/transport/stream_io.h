// I/O on blocking stream sockets for the TCP and shared-memory transports: gathered writes of
// whole messages, and a reader that takes small messages in one system call (through a staging
// buffer) and large payloads straight into the caller's buffers. Without a deadline a call
// blocks; with one it passes MSG_DONTWAIT and waits in poll() until the deadline. The reader
// also reads through TLS (tls_stream.h) when the connection has it.
// Not thread-safe: one reader and one writer per socket at a time.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/unique_fd.h"
#include "tessera/status.h"
#include "transport/transport.h"

namespace tessera {

// A client connection's socket that another thread may abort: Abort() shuts the socket down, so a
// send, recv or poll blocked on it returns at once, and marks it aborted, so every later use
// fails; opening and closing it never race with that. Owner calls (Set, Reset, get) come from one
// thread; Abort and aborted from any.
class AbortableSocket {
 public:
  int get() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }
  // Takes a connected socket; false (and closes it) once aborted.
  bool Set(UniqueFd fd);
  void Reset();
  void Abort();
  bool aborted() const { return aborted_.load(); }

 private:
  mutable std::mutex mu_;  // guards fd_ against a concurrent Abort
  UniqueFd fd_;
  std::atomic<bool> aborted_{false};
};

// The error of a call on an aborted connection.
Status AbandonedCall(const std::string& peer, const char* transport);

// Writes every byte of iov[0..n); the array is advanced in place. `deadline` null: the socket
// is blocking and there is no deadline. Unavailable on a broken connection, DeadlineExceeded.
Status WriteFully(int fd, iovec* iov, size_t n, const Deadline* deadline);

// Waits in poll() until `fd` has one of `events` (or an error the next call reports) or the
// deadline passes (null: forever). DeadlineExceeded, or Unavailable if poll fails.
Status WaitFd(int fd, short events, const Deadline* deadline);
// Data-plane work under way in this process: a client's call from its start to its reply, a
// server connection's request from its arrival to its reply sent. Busy polling is for a side that
// waits alone: other work needs the cores.
class DataPlaneWork {
 public:
  DataPlaneWork() { count_.fetch_add(1, std::memory_order_relaxed); }
  ~DataPlaneWork() { count_.fetch_sub(1, std::memory_order_relaxed); }
  DataPlaneWork(const DataPlaneWork&) = delete;
  DataPlaneWork& operator=(const DataPlaneWork&) = delete;
  static int count() { return count_.load(std::memory_order_relaxed); }

 private:
  static std::atomic<int> count_;
};

// Busy polling (TransportOptions::busy_poll): checks, without sleeping, whether `fd` has
// something to read, until it has (or is closed) or `spin` has passed, yielding the core between
// checks to any thread ready to run on it; the caller's read then takes it, or sleeps as before. Nothing (or
// no longer) when `spin` is zero, while another thread of the process polls, or while the process has more
// DataPlaneWork under way than the caller's own `own_work` (1 for a call waiting for its reply).
// Nor while the process's SpinGovernor says spinning does not pay here (it lost its core, or its
// spins keep running out): the wait then sleeps at once.
void SpinUntilReadable(int fd, std::chrono::microseconds spin, int own_work = 0);

// This process's busy polling so far: waits that spun, waits that slept at once because the
// governor backed off, and its back-offs.
struct SpinCounters {
  int64_t spins = 0;
  int64_t skipped = 0;
  int64_t back_offs = 0;
};
SpinCounters SpinCountersNow();
// "busy polling: 9000 waits spun, 128 slept at once (2 back-offs)", or "" if it never polled.
std::string SpinSummary(const SpinCounters& c);

// Runs one socket call `io` (a send or recv: returns what they return, sets errno) until it
// does not fail with EINTR, or with EAGAIN before the deadline (it then waits for `events`).
// The call's result (>= 0: bytes, 0 on a recv at end of stream), or Unavailable("<what>: ...")
// / DeadlineExceeded.
template <typename Io>
StatusOr<size_t> RetrySocketCall(int fd, short events, const Deadline* deadline, const char* what, Io io) {
  while (true) {
    ssize_t r = io();
    if (r >= 0) return static_cast<size_t>(r);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return Status::Unavailable(std::string(what) + ": " + std::strerror(errno));
    TESSERA_RETURN_IF_ERROR(WaitFd(fd, events, deadline));
  }
}

class TlsStream;

class StreamReader {
 public:
  explicit StreamReader(size_t stage_bytes = 64 * 1024);
  // A new connection: forget staged bytes. With `tls`, bytes are read through it (it must
  // outlive its use here).
  void Reset(int fd, TlsStream* tls = nullptr);

  // Reads exactly n bytes into dst. Unavailable("connection closed ...") at end of stream.
  Status Read(void* dst, size_t n, const Deadline* deadline);
  // Reads exactly n bytes, filling `bufs` in order (their total must be >= n). `watcher` (if
  // any) is told how many have landed after each receive.
  Status ReadInto(std::span<const MutableBuffer> bufs, size_t n, const Deadline* deadline,
                  ReplyWatcher* watcher = nullptr);
  // Reads and drops n bytes.
  Status Skip(size_t n, const Deadline* deadline);
  // Whether bytes of a next message are already staged.
  bool staged() const { return begin_ < end_; }
  // Bytes that arrived before the stream ended, for telling a clean close from a cut frame.
  uint64_t total_read() const { return total_; }
  // Before reading a message: SpinUntilReadable, unless bytes of it are staged here or in TLS.
  void AwaitMessage(std::chrono::microseconds spin, int own_work = 0);

 private:
  // Receives at least one byte into the stage. Unavailable at end of stream.
  Status Fill(const Deadline* deadline);
  // Receives `bytes` into `iov` (n entries); `watcher` is told after each receive how many have
  // landed since the read began, counting the `placed` before.
  Status ReadDirect(iovec* iov, size_t n, size_t bytes, const Deadline* deadline, ReplyWatcher* watcher,
                    size_t placed);

  int fd_ = -1;
  TlsStream* tls_ = nullptr;
  std::unique_ptr<char[]> stage_;
  std::vector<iovec> iov_;  // reused by ReadInto
  size_t stage_size_;
  size_t begin_ = 0, end_ = 0;
  uint64_t total_ = 0;
};

// "host:port" -> a connected, blocking TCP socket with TCP_NODELAY.
StatusOr<UniqueFd> ConnectTcp(const std::string& address, const Deadline& deadline);
// The peer's address of a connected socket ("127.0.0.1:43122"), for log lines.
std::string PeerName(int fd);

}  // namespace tessera
