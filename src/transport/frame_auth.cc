// FrameAuth (see frame_auth.h).
#include "transport/frame_auth.h"

#include <cstring>

namespace tessera {
namespace {

void PutU32(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(in[i]) << (8 * i);
  return v;
}

}  // namespace

FrameAuth::FrameAuth(const security::JobSecret& secret, const security::Nonce& nonce) : nonce_(nonce) {
  if (!secret.empty()) mac_ = std::make_unique<security::FrameMac>(secret.Derive("frames"), nonce_);
}

FrameAuth FrameAuth::ForServer(const security::JobSecret& secret) {
  return FrameAuth(secret, security::NewNonce());
}

StatusOr<FrameAuth> FrameAuth::FromGreeting(const uint8_t greeting[kGreetingBytes],
                                            const security::JobSecret& secret, const std::string& peer) {
  if (GetU32(greeting) != kGreetingMagic) {
    return Status::Unavailable("the server at " + peer + " did not greet as a Tessera pserver does");
  }
  const uint32_t flags = GetU32(greeting + 4);
  const bool wants = flags & kGreetingFlagAuth;
  if (wants && secret.empty()) {
    return Status::Unauthenticated(
        "the pserver at " + peer +
        " requires its job's secret and this process has none (is it another job's "
        "pserver? the secret comes from etcd with the job, or TESSERA_JOB_SECRET_FILE)");
  }
  if (!wants && !secret.empty()) {
    return Status::Unauthenticated("the server at " + peer +
                                   " does not check this job's secret: it is not a pserver of this job");
  }
  security::Nonce nonce;
  std::memcpy(nonce.data(), greeting + 16, nonce.size());
  return FrameAuth(secret, nonce);
}

void FrameAuth::EncodeGreeting(uint8_t out[kGreetingBytes]) const {
  std::memset(out, 0, kGreetingBytes);
  PutU32(out, kGreetingMagic);
  PutU32(out + 4, enabled() ? kGreetingFlagAuth : 0);
  std::memcpy(out + 16, nonce_.data(), nonce_.size());
}

void FrameAuth::Sign(uint8_t preamble[kFramePreambleBytes], std::string_view header) {
  if (mac_) mac_->Tag(preamble, kFrameMacOffset, header, preamble + kFrameMacOffset);
}

Status FrameAuth::CheckRequest(const uint8_t preamble[kFramePreambleBytes], uint64_t request_id,
                               std::string_view header) {
  if (!mac_) return Status::OK();
  if (!mac_->Check(preamble, kFrameMacOffset, header, preamble + kFrameMacOffset)) {
    return Status::Unauthenticated("the request's job MAC does not check (no secret, or another job's)");
  }
  if (request_id <= last_id_) {
    return Status::Unauthenticated("request id " + std::to_string(request_id) + " does not rise past " +
                                   std::to_string(last_id_) + " (a replayed frame)");
  }
  last_id_ = request_id;
  return Status::OK();
}

Status FrameAuth::CheckReply(const uint8_t preamble[kFramePreambleBytes], std::string_view header,
                             const std::string& peer) {
  if (!mac_ || mac_->Check(preamble, kFrameMacOffset, header, preamble + kFrameMacOffset))
    return Status::OK();
  return Status::Unauthenticated("the reply from " + peer +
                                 " does not carry this job's MAC: it is not a pserver of this job");
}

void EncodeRefusal(uint64_t id, uint8_t out[kFramePreambleBytes]) {
  EncodePreamble({FrameKind::kReply, kFrameFlagRefused, id, 0, 0}, out);
}

Status RefusedByServer(const std::string& peer, const char* transport) {
  return Status::Unauthenticated("pserver " + peer + " (" + std::string(transport) +
                                 ") refused this process's job credentials: it holds another job's secret");
}

}  // namespace tessera
