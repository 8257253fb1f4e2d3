// Shared-memory regions and seqpacket frames for the shared-memory transport (shm_transport.h).
// OwnRegion: the memory this side writes its messages into (a sealed memfd, mapped read-write).
// PeerRegion: the other side's, mapped read-only after checking it cannot shrink under us.
// SendFrame/RecvFrame: one 48-byte preamble per seqpacket message, with at most one descriptor.
// Not thread-safe (one owner each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/clock.h"
#include "tessera/status.h"
#include "transport/frame.h"
#include "transport/stream_io.h"

namespace tessera {

// A memfd of `size` bytes that this user alone may open (mode 0600: through /proc/PID/fd a
// memfd opens by its mode), sealed so it can neither shrink nor grow under a peer that maps it.
// `what` names it in errors ("the shared region", "the window").
StatusOr<UniqueFd> NewSealedMemfd(size_t size, const char* what);

class OwnRegion {
 public:
  OwnRegion() = default;
  ~OwnRegion() { Unmap(); }
  OwnRegion(const OwnRegion&) = delete;
  OwnRegion& operator=(const OwnRegion&) = delete;

  // Makes the region hold at least `bytes`, keeping the first `keep` bytes. A new region's
  // descriptor must go to the peer with the next frame (pending_fd()).
  Status Ensure(size_t bytes, size_t keep, size_t max_bytes);
  char* data() { return map_; }
  size_t size() const { return size_; }
  // The descriptor of a region the peer has not been sent yet (-1: none).
  int pending_fd() const { return pending_.get(); }
  void FdSent() { pending_.Reset(); }
  // Forgets the region (a new connection gets a new one: an old peer may still read this one).
  void Reset() {
    Unmap();
    pending_.Reset();
  }

 private:
  void Unmap();
  char* map_ = nullptr;
  size_t size_ = 0;
  UniqueFd pending_;
};

class PeerRegion {
 public:
  PeerRegion() = default;
  ~PeerRegion() { Unmap(); }
  PeerRegion(const PeerRegion&) = delete;
  PeerRegion& operator=(const PeerRegion&) = delete;

  // Maps `fd` in place of the current region: read-only, or read-write for a trainer's window
  // (shm_window.h). InvalidArgument if it is not a sealed memfd (F_SEAL_SHRINK) or its size is
  // zero or past `max_bytes`.
  Status Map(UniqueFd fd, size_t max_bytes, bool writable = false);
  const char* data() const { return map_; }
  // Only for a region mapped writable.
  char* writable_data() const { return const_cast<char*>(map_); }
  size_t size() const { return size_; }
  bool mapped() const { return map_ != nullptr; }
  void Reset() { Unmap(); }

 private:
  void Unmap();
  const char* map_ = nullptr;
  size_t size_ = 0;
};

// One sendmsg of `n` bytes with `pass_fd` attached when >= 0 (SCM_RIGHTS); returns what sendmsg
// returns. `flags` are added to MSG_NOSIGNAL. SendFrame's building block; tests use it to send
// malformed messages.
ssize_t SendWithDescriptor(int sock, const void* data, size_t n, int pass_fd, int flags);
// Sends one preamble, with `pass_fd` attached when >= 0. `deadline` null: blocking.
Status SendFrame(int sock, const uint8_t (&preamble)[kFramePreambleBytes], int pass_fd,
                 const Deadline* deadline);
// Receives one preamble and the descriptor that came with it, if any. Cancelled when the peer
// closed; InvalidArgument for a message that is not exactly one preamble or carries more than one
// descriptor (those are closed).
Status RecvFrame(int sock, uint8_t (&preamble)[kFramePreambleBytes], UniqueFd* fd, const Deadline* deadline);

// The server's greeting (frame.h) as one message, and the client's receipt of it.
Status SendGreeting(int sock, const uint8_t (&greeting)[kGreetingBytes], const Deadline* deadline);
Status RecvGreeting(int sock, uint8_t (&greeting)[kGreetingBytes], const Deadline* deadline);

// Unavailable("<what>: <strerror(errno)>"), for a system call of the shared-memory transport that failed.
Status ShmErrno(const std::string& what);

// The largest region a transport with these limits ever needs.
inline size_t MaxRegionBytes(const FrameLimits& l) { return PayloadAlign(l.max_payload) + l.max_header; }

}  // namespace tessera
