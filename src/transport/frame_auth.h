// The job authentication of one TCP or shared-memory connection (frame.h): the server's side
// makes the greeting (a fresh nonce, and whether frames must carry the job's MAC); the client's
// side is built from the greeting it reads. Both then sign the frames they send and check the
// frames they receive with security::FrameMac. Without a secret on either side nothing is signed.
//
// A client that holds the job's secret refuses a server that does not ask for it (not a server of
// this job); a client without one is told at once when the server asks for it. A server refuses
// a request whose MAC does not check, or whose id does not rise (a frame replayed on the
// connection). One owner (the connection); not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "security/frame_mac.h"
#include "security/job_secret.h"
#include "tessera/status.h"
#include "transport/frame.h"

namespace tessera {

class FrameAuth {
 public:
  // The server's side of a new connection.
  static FrameAuth ForServer(const security::JobSecret& secret);
  // The client's side, from the server's greeting. `peer` names the server in errors.
  // Unavailable for a greeting that is not one (not a Tessera pserver, or cut short);
  // Unauthenticated when the two sides disagree on the job's secret.
  static StatusOr<FrameAuth> FromGreeting(const uint8_t greeting[kGreetingBytes],
                                          const security::JobSecret& secret, const std::string& peer);

  void EncodeGreeting(uint8_t out[kGreetingBytes]) const;
  bool enabled() const { return mac_ != nullptr; }

  // Fills in the MAC of an encoded preamble (a no-op when not enabled).
  void Sign(uint8_t preamble[kFramePreambleBytes], std::string_view header);
  // Server: checks a request's MAC and that its id rises. Unauthenticated saying which.
  Status CheckRequest(const uint8_t preamble[kFramePreambleBytes], uint64_t request_id,
                      std::string_view header);
  // Client: checks a reply's MAC. Unauthenticated if it does not check (not this job's server).
  Status CheckReply(const uint8_t preamble[kFramePreambleBytes], std::string_view header,
                    const std::string& peer);

 private:
  FrameAuth(const security::JobSecret& secret, const security::Nonce& nonce);
  security::Nonce nonce_{};
  std::unique_ptr<security::FrameMac> mac_;
  uint64_t last_id_ = 0;
};

// The preamble of a refusal: a reply to request `id` with kFrameFlagRefused and nothing after
// it. The server sends it, then closes the connection.
void EncodeRefusal(uint64_t id, uint8_t out[kFramePreambleBytes]);
// The error a client gives for a refusal from `peer`.
Status RefusedByServer(const std::string& peer, const char* transport);

}  // namespace tessera
