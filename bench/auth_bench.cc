// auth_bench: the cost of a job's message authentication alone (security/), beside the
// end-to-end round trips ps_bench measures: a frame's MAC signed and checked (tcp, shm: twice per
// round trip), and an RPC token made and checked (grpc data plane and master calls: twice per
// round trip), over a 200-byte header. Bench-only.
#include <chrono>
#include <cstdio>
#include <string>

#include "security/frame_mac.h"
#include "security/rpc_auth.h"

int main() {
  using Clock = std::chrono::steady_clock;
  const tessera::security::JobSecret secret = tessera::security::JobSecret::Generate();
  const std::string header(200, 'h');
  const int n = 200000;
  size_t ok = 0;
  tessera::security::FrameMac mac(secret.Derive("frames"), tessera::security::NewNonce());
  uint8_t preamble[48] = {}, tag[tessera::security::kFrameTagBytes];
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    preamble[8] = static_cast<uint8_t>(i);
    mac.Tag(preamble, 32, header, tag);
    ok += mac.Check(preamble, 32, header, tag);
  }
  auto t1 = Clock::now();
  const tessera::security::RpcAuth rpc(secret);
  const int m = n / 10;
  for (int i = 0; i < m; ++i) {
    const std::string token = rpc.Token("DataPlane/Call", header, 1'800'000'000'000 + i);
    ok += rpc.Check(token, "DataPlane/Call", header, 1'800'000'000'000 + i).ok();
  }
  auto t2 = Clock::now();
  const double frame_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  const double rpc_us = std::chrono::duration<double, std::micro>(t2 - t1).count() / m;
  std::printf(
      "\n| job authentication (200-byte header) | per message (us) | per round trip (us) |\n|---|---|---|\n");
  std::printf("| frame MAC, signed and checked (tcp, shm) | %.2f | %.2f |\n", frame_us, 2 * frame_us);
  std::printf("| RPC token, made and checked (grpc, master) | %.2f | %.2f |\n", rpc_us, 2 * rpc_us);
  return ok == static_cast<size_t>(n + m) ? 0 : 1;
}
