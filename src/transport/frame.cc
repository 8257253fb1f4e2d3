// Frame preamble encoding and checks (see frame.h).
#include "transport/frame.h"

#include <cstdio>
#include <cstring>

namespace tessera {
namespace {

template <typename T>
void Put(uint8_t* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

template <typename T>
T Get(const uint8_t* in) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return static_cast<T>(v);
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

void EncodePreamble(const FramePreamble& p, uint8_t out[kFramePreambleBytes]) {
  std::memset(out, 0, kFramePreambleBytes);
  Put<uint32_t>(out, kFrameMagic);
  out[4] = static_cast<uint8_t>(p.kind);
  out[5] = p.flags;
  Put<uint64_t>(out + 8, p.request_id);
  Put<uint32_t>(out + 16, p.header_len);
  Put<uint64_t>(out + 24, p.payload_len);
}

StatusOr<FramePreamble> DecodePreamble(const uint8_t in[kFramePreambleBytes], const FrameLimits& limits) {
  const uint32_t magic = Get<uint32_t>(in);
  if (magic != kFrameMagic) {
    return Status::InvalidArgument("bad frame magic " + Hex(magic) + " (not a Tessera data-plane frame)");
  }
  FramePreamble p;
  const uint8_t kind = in[4];
  if (kind != static_cast<uint8_t>(FrameKind::kRequest) && kind != static_cast<uint8_t>(FrameKind::kReply)) {
    return Status::InvalidArgument("unknown frame kind " + std::to_string(kind));
  }
  p.kind = static_cast<FrameKind>(kind);
  p.flags = in[5];
  if (p.flags & ~(kFrameFlagNewRegion | kFrameFlagRefused | kFrameFlagNewWindow | kFrameFlagInWindow)) {
    return Status::InvalidArgument("unknown frame flags " + std::to_string(p.flags));
  }
  if (Get<uint16_t>(in + 6) != 0 || Get<uint32_t>(in + 20) != 0) {
    return Status::InvalidArgument("reserved frame fields are not zero");
  }
  p.request_id = Get<uint64_t>(in + 8);
  p.header_len = Get<uint32_t>(in + 16);
  p.payload_len = Get<uint64_t>(in + 24);
  if (p.header_len > limits.max_header) {
    return Status::InvalidArgument("frame header of " + std::to_string(p.header_len) +
                                   " bytes is larger than the maximum " + std::to_string(limits.max_header));
  }
  if (p.payload_len > limits.max_payload) {
    return Status::InvalidArgument("frame payload of " + std::to_string(p.payload_len) +
                                   " bytes is larger than the maximum " + std::to_string(limits.max_payload) +
                                   " (--max-message-mb)");
  }
  return p;
}

void EncodeWindowDescriptor(const WindowDescriptor& w, uint8_t out[kWindowDescriptorBytes]) {
  std::memset(out, 0, kWindowDescriptorBytes);
  Put<uint64_t>(out, w.payload_offset);
  Put<uint64_t>(out + 8, w.reply_offset);
  Put<uint64_t>(out + 16, w.reply_room);
  Put<uint64_t>(out + 24, w.progress_offset);
}

bool ReplyOverlapsPayload(const WindowDescriptor& w, uint64_t payload_len) {
  if (payload_len == 0 || w.reply_room == 0) return false;
  // Both ranges lie in the window (no overflow): they overlap unless one ends before the other.
  return w.reply_offset < w.payload_offset + payload_len && w.payload_offset < w.reply_offset + w.reply_room;
}

StatusOr<WindowDescriptor> DecodeWindowDescriptor(const uint8_t in[kWindowDescriptorBytes],
                                                  uint64_t payload_len, uint64_t window_bytes) {
  WindowDescriptor w{Get<uint64_t>(in), Get<uint64_t>(in + 8), Get<uint64_t>(in + 16),
                     Get<uint64_t>(in + 24)};
  auto outside = [&](uint64_t off, uint64_t len) { return off > window_bytes || len > window_bytes - off; };
  auto say = [&](const char* what, uint64_t off, uint64_t len) {
    return Status::InvalidArgument("the request's " + std::string(what) + " (" + std::to_string(len) +
                                   " bytes at offset " + std::to_string(off) + ") lies outside the " +
                                   std::to_string(window_bytes) + "-byte window");
  };
  if (outside(w.payload_offset, payload_len)) return say("payload", w.payload_offset, payload_len);
  if (outside(w.reply_offset, w.reply_room)) return say("reply room", w.reply_offset, w.reply_room);
  if (ReplyOverlapsPayload(w, payload_len)) {
    return Status::InvalidArgument("the request's reply room (" + std::to_string(w.reply_room) +
                                   " bytes at offset " + std::to_string(w.reply_offset) +
                                   ") overlaps its payload (" + std::to_string(payload_len) +
                                   " bytes at offset " + std::to_string(w.payload_offset) + ")");
  }
  if (w.progress_offset != 0) {
    const uint64_t at = w.progress_offset;
    auto shares = [&](uint64_t off, uint64_t len) { return len > 0 && at < off + len && off < at + 8; };
    if (at % 8 != 0 || outside(at, 8) || shares(w.payload_offset, payload_len) ||
        shares(w.reply_offset, w.reply_room)) {
      return Status::InvalidArgument("the request's progress word (offset " + std::to_string(at) +
                                     ") is not an aligned word of the " + std::to_string(window_bytes) +
                                     "-byte window apart from its payload and reply room");
    }
  }
  return w;
}

Status CheckRequestSize(size_t header_len, size_t payload_len, const FrameLimits& limits) {
  if (header_len > limits.max_header) {
    return Status::InvalidArgument("request header of " + std::to_string(header_len) +
                                   " bytes is larger than the maximum " + std::to_string(limits.max_header));
  }
  if (payload_len > limits.max_payload) {
    return Status::InvalidArgument("request payload of " + std::to_string(payload_len) +
                                   " bytes is larger than the maximum " + std::to_string(limits.max_payload) +
                                   " (split the parameters over more pservers or raise --max-message-mb)");
  }
  return Status::OK();
}

StatusOr<FramePreamble> DecodeReply(const uint8_t in[kFramePreambleBytes], const FrameLimits& limits,
                                    uint64_t id) {
  auto p = DecodePreamble(in, limits);
  if (!p.ok()) return Status::Unavailable("bad reply frame: " + p.status().message());
  if (p->kind != FrameKind::kReply || p->request_id != id) {
    return Status::Unavailable("bad reply frame: for request " + std::to_string(p->request_id) +
                               ", expected " + std::to_string(id));
  }
  return p;
}

Status ReplyTooLarge(const std::string& peer, uint64_t payload_len, size_t room) {
  return Status::DataLoss("pserver " + peer + " replied with " + std::to_string(payload_len) +
                          " payload bytes, more than the " + std::to_string(room) + " expected");
}

Status CallFailed(const std::string& peer, const char* transport, const std::string& what, const Status& s) {
  auto code = s.code() == StatusCode::kDeadlineExceeded ? s.code() : StatusCode::kUnavailable;
  return Status(code, "pserver " + peer + " (" + transport + "): " + what + ": " + s.message());
}

}  // namespace tessera
