// The frame of Tessera's own data-plane transports (TCP and shared memory): the server's greeting
// when a connection opens, then a fixed 48-byte preamble in front of every message, the message
// header (a serialized DataRequest or DataReply) and the payload. Encoding and checking only:
// pure, no I/O, thread-safe.
//
// Greeting, server to client, once per connection (little-endian):
//   0  u32 magic        "TSH1" (0x31485354)
//   4  u32 flags        bit 0: frames carry the job's MAC (the job has a secret)
//   8  u64 reserved     0
//   16 u8[16] nonce     random, new for every connection
// Preamble (little-endian):
//   0  u32 magic        "TSD2" (0x32445354)
//   4  u8  kind         1 = request, 2 = reply
//   5  u8  flags        bit 0: a new shared-memory region comes with this frame (shm only)
//                       bit 1: refused: the server did not accept the request's job MAC and closes
//                       bit 2: the descriptor that comes with this request is the client's
//                              window (shm only, once per connection, with bit 3)
//                       bit 3: in the window (shm only). A request: its payload lies in the
//                              client's window, and its header starts with a window descriptor
//                              (32 bytes: u64 payload offset, u64 reply offset, u64 reply room,
//                              u64 0) that the MAC covers with the rest. A reply: its payload
//                              was written into the window at the request's reply offset.
//   6  u16 reserved     0
//   8  u64 request_id   chosen by the client, rising on a connection; a reply carries its request's
//   16 u32 header_len   bytes of the message header
//   20 u32 reserved     0
//   24 u64 payload_len  bytes of the payload
//   32 u8[16] mac       with a secret: security::FrameMac over the nonce, bytes 0-31 and the header;
//                       zero otherwise
// Over TCP the header and then the payload follow the preamble on the stream. Over shared memory
// they sit in the sender's region: payload at offset 0, header at PayloadAlign(payload_len).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/status.h"

namespace tessera {

constexpr uint32_t kFrameMagic = 0x32445354;  // "TSD2"
constexpr size_t kFramePreambleBytes = 48;
constexpr size_t kFrameMacOffset = 32;           // the MAC covers the bytes before it
constexpr uint32_t kGreetingMagic = 0x31485354;  // "TSH1"
constexpr size_t kGreetingBytes = 32;
constexpr uint32_t kGreetingFlagAuth = 1;

enum class FrameKind : uint8_t { kRequest = 1, kReply = 2 };
constexpr uint8_t kFrameFlagNewRegion = 1;
constexpr uint8_t kFrameFlagRefused = 2;
constexpr uint8_t kFrameFlagNewWindow = 4;
constexpr uint8_t kFrameFlagInWindow = 8;
constexpr size_t kWindowDescriptorBytes = 32;

struct FramePreamble {
  FrameKind kind = FrameKind::kRequest;
  uint8_t flags = 0;
  uint64_t request_id = 0;
  uint32_t header_len = 0;
  uint64_t payload_len = 0;
};

// What a receiver accepts; anything larger is refused before a byte of it is read.
struct FrameLimits {
  size_t max_header = size_t{64} << 20;  // 64 MiB: a sparse request lists its keys here
  size_t max_payload = size_t{2} << 30;  // 2 GiB (--max-message-mb)
};

// Writes the preamble with a zero MAC (FrameAuth::Sign fills it in).
void EncodePreamble(const FramePreamble& p, uint8_t out[kFramePreambleBytes]);
// InvalidArgument saying what is wrong (bad magic, unknown kind or flags, a length past the
// limits), so the receiver can log it and close the connection.
StatusOr<FramePreamble> DecodePreamble(const uint8_t in[kFramePreambleBytes], const FrameLimits& limits);

// A client's own check before it sends: InvalidArgument naming the limit a request passes (the
// pserver would close the connection on it, and retrying would not help).
Status CheckRequestSize(size_t header_len, size_t payload_len, const FrameLimits& limits);
// A client's reply preamble: decoded, a reply, and the answer to request `id`; Unavailable
// otherwise (the connection is out of step and must be dropped).
StatusOr<FramePreamble> DecodeReply(const uint8_t in[kFramePreambleBytes], const FrameLimits& limits,
                                    uint64_t id);
// The DataLoss of a reply carrying more payload than the caller gave room for.
Status ReplyTooLarge(const std::string& peer, uint64_t payload_len, size_t room);
// A client call that failed at step `what` ("send", "waiting for the reply", ...): after it the
// connection's state is unknown and the caller drops it. A deadline stays DeadlineExceeded;
// everything else becomes Unavailable (retry on a new connection). Names the pserver and the
// transport.
Status CallFailed(const std::string& peer, const char* transport, const std::string& what, const Status& s);

// A request in a trainer's window (kFrameFlagInWindow): where its payload lies and where the
// reply may be written (reply_room 0: not there).
struct WindowDescriptor {
  uint64_t payload_offset = 0;
  uint64_t reply_offset = 0;
  uint64_t reply_room = 0;
  // Where the pserver may store, as it writes the reply in place, how many of its bytes from the
  // room's start are written (a u64, 8-aligned, outside the payload and the room; 0: nowhere).
  uint64_t progress_offset = 0;
};
void EncodeWindowDescriptor(const WindowDescriptor& w, uint8_t out[kWindowDescriptorBytes]);
// Whether the reply room shares a byte with the payload of `payload_len` bytes (the apply would
// write the reply while it reads the gradient: a client sends such a call copied).
bool ReplyOverlapsPayload(const WindowDescriptor& w, uint64_t payload_len);
// InvalidArgument saying which range lies outside a window of `window_bytes` (the payload's is
// `payload_len` bytes), that the reply room overlaps the payload, or that the reserved field is
// not zero.
StatusOr<WindowDescriptor> DecodeWindowDescriptor(const uint8_t in[kWindowDescriptorBytes],
                                                  uint64_t payload_len, uint64_t window_bytes);

// Where the header starts in a shared-memory region after a payload of `payload_len` bytes.
constexpr uint64_t PayloadAlign(uint64_t payload_len) { return (payload_len + 63) & ~uint64_t{63}; }

}  // namespace tessera
