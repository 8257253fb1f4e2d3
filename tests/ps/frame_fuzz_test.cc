// Robust framing: for 30 s, threads throw random, truncated and lying frames at a live pserver's
// TCP and shared-memory endpoints (random bytes, valid preambles with impossible or huge lengths
// and then nothing, bodies cut short, garbage headers, requests without a shared region,
// unsealed regions, stray descriptors, trainer windows that come wrongly or that a request's
// payload lies outside of, reply rooms over the payload) and random bytes at its gRPC port,
// while a well-behaved trainer trains against it and checks every result bit for bit. The
// pserver must keep answering that trainer correctly, stay alive, keep its memory bounded, and
// log the connections it closed with the peer named. Half the abusers hold the job's secret and sign their
// frames (a buggy trainer of the job, whose garbage reaches the parser); the others are refused at the MAC.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "harness/pids.h"
#include "ps/ps_fixture.h"
#include "pserver/optimizer.h"
#include "tessera/data.pb.h"
#include "transport/frame.h"
#include "transport/frame_auth.h"
#include "transport/shm_region.h"
#include "transport/stream_io.h"

namespace tessera::testing {
namespace {

std::vector<uint8_t> Preamble(std::mt19937_64& rng, uint64_t header, uint64_t payload) {
  std::vector<uint8_t> p(kFramePreambleBytes);
  EncodePreamble({FrameKind::kRequest, 0, rng(), static_cast<uint32_t>(header), payload}, p.data());
  return p;
}

std::vector<uint8_t> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// Signs the preamble at the start of `out` with the header after it, when all of it is there.
void SignIfWhole(std::optional<FrameAuth>& auth, std::vector<uint8_t>& out) {
  if (!auth || out.size() < kFramePreambleBytes) return;
  uint32_t h = 0;
  std::memcpy(&h, out.data() + 16, 4);
  if (out.size() < kFramePreambleBytes + h) return;
  auth->Sign(out.data(),
             std::string_view(reinterpret_cast<const char*>(out.data()) + kFramePreambleBytes, h));
}

// One abusive TCP connection: what it sends depends on `kind`. With `secret` the abuser reads the
// greeting and signs its frames as the job's own processes do.
void AbuseTcp(const std::string& endpoint, std::mt19937_64& rng, int kind,
              const security::JobSecret& secret) {
  auto fd = ConnectTcp(endpoint, Deadline(std::chrono::seconds(2)));
  if (!fd.ok()) return;
  std::optional<FrameAuth> auth;
  if (!secret.empty()) {
    StreamReader reader;
    reader.Reset(fd->get());
    uint8_t greeting[kGreetingBytes];
    Deadline d(std::chrono::seconds(2));
    if (!reader.Read(greeting, sizeof greeting, &d).ok()) return;
    auto a = FrameAuth::FromGreeting(greeting, secret, endpoint);
    if (!a.ok()) return;
    auth.emplace(std::move(*a));
  }
  std::vector<uint8_t> out;
  switch (kind) {
    case 0:  // random bytes
      out = RandomBytes(rng, 1 + rng() % 4096);
      break;
    case 1: {  // a valid preamble claiming 1.9 GiB, then its header and a little, then gone
      out = Preamble(rng, 10, (size_t{19} << 30) / 10);
      auto body = RandomBytes(rng, 10 + rng() % 4096);
      out.insert(out.end(), body.begin(), body.end());
      break;
    }
    case 2:  // past the limits
      out = Preamble(rng, uint64_t{1} << 31, 10);
      break;
    case 3: {  // a garbage header with a matching payload
      uint64_t h = rng() % 2000, n = rng() % 100000;
      out = Preamble(rng, h, n);
      auto body = RandomBytes(rng, h + n);
      out.insert(out.end(), body.begin(), body.end());
      break;
    }
    case 4: {  // a body cut short
      out = Preamble(rng, 100, 1 << 20);
      auto body = RandomBytes(rng, rng() % (1 << 20));
      out.insert(out.end(), body.begin(), body.end());
      break;
    }
    default: {  // a preamble cut short
      out = Preamble(rng, 1, 1);
      out.resize(rng() % kFramePreambleBytes);
    }
  }
  SignIfWhole(auth, out);
  iovec iov{out.data(), out.size()};
  Deadline d(std::chrono::seconds(2));
  (void)WriteFully(fd->get(), &iov, 1, &d);
  // Sometimes wait for the pserver to close it (a well-framed garbage request gets an answer).
  if (rng() % 2) {
    char c[256];
    pollfd p{fd->get(), POLLIN, 0};
    for (int i = 0; i < 4 && ::poll(&p, 1, 200) > 0; ++i) {
      if (::recv(fd->get(), c, sizeof c, MSG_DONTWAIT) <= 0) break;
    }
  }
}

int SendWithFd(int sock, const void* data, size_t n, int fd) {
  return static_cast<int>(SendWithDescriptor(sock, data, n, fd, MSG_DONTWAIT));
}

// A memfd of `bytes` sealed against shrinking, as the transport's regions and windows are.
int SealedMemfd(size_t bytes) {
  int m = ::memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  (void)!::ftruncate(m, static_cast<off_t>(bytes));
  ::fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
  return m;
}

// One abusive shared-memory connection.
void AbuseShm(const std::string& endpoint, std::mt19937_64& rng, int kind,
              const security::JobSecret& secret) {
  UniqueFd sock(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, endpoint.data() + 1, endpoint.size() - 1);
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + endpoint.size());
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) return;
  std::optional<FrameAuth> auth;
  if (!secret.empty()) {
    uint8_t greeting[kGreetingBytes];
    Deadline d(std::chrono::seconds(2));
    if (!RecvGreeting(sock.get(), greeting, &d).ok()) return;
    auto g = FrameAuth::FromGreeting(greeting, secret, endpoint);
    if (!g.ok()) return;
    auth.emplace(std::move(*g));
  }
  auto pre = Preamble(rng, 16, 64);
  switch (kind) {
    case 0: {  // random message sizes and bytes
      auto b = RandomBytes(rng, 1 + rng() % 200);
      SendWithFd(sock.get(), b.data(), b.size(), -1);
      break;
    }
    case 1:  // a request before any region
      SendWithFd(sock.get(), pre.data(), pre.size(), -1);
      break;
    case 2: {  // an unsealed region
      UniqueFd m(::memfd_create("fuzz", MFD_CLOEXEC));
      (void)!::ftruncate(m.get(), 4096);
      pre[5] = kFrameFlagNewRegion;
      SendWithFd(sock.get(), pre.data(), pre.size(), m.get());
      break;
    }
    case 3: {  // a sealed region too small for what the frame claims
      UniqueFd m(::memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING));
      (void)!::ftruncate(m.get(), 4096);
      ::fcntl(m.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
      auto big = Preamble(rng, 100, 1 << 20);
      big[5] = kFrameFlagNewRegion;
      SendWithFd(sock.get(), big.data(), big.size(), m.get());
      break;
    }
    case 4: {  // a sealed region holding garbage: a well-framed request with a random header
      UniqueFd m(::memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING));
      (void)!::ftruncate(m.get(), 1 << 16);
      void* p = ::mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, m.get(), 0);
      auto junk = RandomBytes(rng, 1 << 16);
      std::memcpy(p, junk.data(), junk.size());
      ::munmap(p, 1 << 16);
      ::fcntl(m.get(), F_ADD_SEALS, F_SEAL_SHRINK);
      pre[5] = kFrameFlagNewRegion;
      // The header sits after the 64-byte payload, as the preamble says.
      if (auth) auth->Sign(pre.data(), std::string_view(reinterpret_cast<const char*>(junk.data()) + 64, 16));
      SendWithFd(sock.get(), pre.data(), pre.size(), m.get());
      char c[64];
      pollfd pf{sock.get(), POLLIN, 0};
      if (::poll(&pf, 1, 200) > 0) (void)!::recv(sock.get(), c, sizeof c, MSG_DONTWAIT);
      break;
    }
    case 5: {  // a trainer's window sent with a frame that also brings a region
      UniqueFd m(SealedMemfd(4096));
      pre[5] = kFrameFlagNewRegion | kFrameFlagNewWindow | kFrameFlagInWindow;
      SendWithFd(sock.get(), pre.data(), pre.size(), m.get());
      break;
    }
    case 6:    // a request in a window whose payload lies outside it
    case 7:    // a request in a window before any window
    case 8: {  // a request in a window whose reply room overlaps its payload
      // The region holds a window descriptor and a header after it; the first request (a
      // garbage header: the descriptor's bytes) brings the region and is answered.
      UniqueFd region(SealedMemfd(1 << 16));
      char* r =
          static_cast<char*>(::mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, region.get(), 0));
      EncodeWindowDescriptor(
          kind == 8 ? WindowDescriptor{0, 32, 64} : WindowDescriptor{uint64_t{1} << 20, 0, 0},
          reinterpret_cast<uint8_t*>(r));
      auto junk = RandomBytes(rng, 16);
      std::memcpy(r + kWindowDescriptorBytes, junk.data(), junk.size());
      const std::string_view signed_part(r, kWindowDescriptorBytes + 16);
      uint8_t first[kFramePreambleBytes], second[kFramePreambleBytes];
      EncodePreamble({FrameKind::kRequest, kFrameFlagNewRegion, 1, 16, 0}, first);
      if (auth) auth->Sign(first, signed_part.substr(0, 16));
      SendWithFd(sock.get(), first, sizeof first, region.get());
      UniqueFd window(SealedMemfd(4096));
      const bool brings_window = kind != 7;
      const uint8_t flags = kFrameFlagInWindow | (brings_window ? kFrameFlagNewWindow : 0);
      EncodePreamble({FrameKind::kRequest, flags, 2, static_cast<uint32_t>(signed_part.size()), 64}, second);
      if (auth) auth->Sign(second, signed_part);
      SendWithFd(sock.get(), second, sizeof second, brings_window ? window.get() : -1);
      ::munmap(r, 1 << 16);
      char c[64];
      pollfd pf{sock.get(), POLLIN, 0};
      for (int i = 0; i < 2 && ::poll(&pf, 1, 200) > 0; ++i) {
        if (::recv(sock.get(), c, sizeof c, MSG_DONTWAIT) <= 0) break;
      }
      break;
    }
    default: {  // a descriptor nobody announced
      UniqueFd m(::memfd_create("fuzz", MFD_CLOEXEC));
      SendWithFd(sock.get(), pre.data(), pre.size(), m.get());
    }
  }
}

// --max-message-mb is the pserver's limit on a request payload: a frame past it closes that
// connection with a log line naming the flag, the pserver goes on serving, and a value out of
// range is refused at start.
TEST_F(PsTest, MaxMessageMbBoundsWhatThePserverAccepts) {
  const std::string job = "limit";
  MakeJob(job, 1, "async", "sgd:lr=0.1", 64);
  size_t p = StartPserver(job, /*ttl=*/5, "tcp", {"--max-message-mb", "1"});
  ASSERT_TRUE(WaitForPservers(job, 1));
  auto conn = RawConnection(job, 0, TransportKind::kTcp);
  ASSERT_NE(conn, nullptr);
  wire::DataRequest req;
  req.set_op(wire::DataRequest::STATUS);
  const std::string header = req.SerializeAsString();
  std::vector<char> big((size_t{1} << 20) + 4), reply(1024);
  ConstBuffer payload{big.data(), big.size()};
  MutableBuffer room{reply.data(), reply.size()};
  auto refused = conn->Call(header, {&payload, 1}, {&room, 1}, std::chrono::seconds(20));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status();
  EXPECT_TRUE(
      procs_[p]->WaitForOutput("frame payload of 1048580 bytes is larger than the maximum 1048576 "
                               "(--max-message-mb)",
                               std::chrono::seconds(20)))
      << procs_[p]->Output();
  // The same connection object reconnects, and a request within the limit is answered.
  ConstBuffer small{big.data(), 1024};
  auto answered = conn->Call(header, {&small, 1}, {&room, 1}, std::chrono::seconds(20));
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_TRUE(procs_[p]->running());

  size_t bad = StartPserver(job, /*ttl=*/5, "tcp", {"--max-message-mb", "0"});
  auto code = procs_[bad]->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(procs_[bad]->Output().find("--max-message-mb must be between 1 and 1048576"), std::string::npos)
      << procs_[bad]->Output();
}

TEST_F(PsTest, RandomAndTruncatedFramesForThirtySecondsLeaveAWellBehavedTrainerUntouched) {
  const std::string job = "fuzz";
  auto cfg = MakeJob(job, 1, "sync", "adam:lr=0.01", 256);
  size_t p = StartPserver(job, /*ttl=*/5);
  ASSERT_TRUE(WaitForPservers(job, 1));
  auto kv = client_->Get(keys::Pserver(job, 0));
  auto endpoints = ParsePserverEndpoints(kv->kvs[0].value);
  ASSERT_TRUE(endpoints.ok());
  const std::string tcp = endpoints->endpoints.at(TransportKind::kTcp);
  const std::string shm = endpoints->endpoints.at(TransportKind::kShm);
  const std::string grpc = endpoints->endpoints.at(TransportKind::kGrpc);

  auto o = ClientFor(job, "good");
  o.transport = "tcp";
  auto client = Client::Connect(o);
  ASSERT_TRUE(client.ok());
  const size_t n = 5000;
  std::vector<float> w(n, 0.1f), ref(n, 0.1f), state(2 * n, 0.0f);
  ASSERT_TRUE((*client)->AddDense("w", w.data(), n).ok());
  ASSERT_TRUE((*client)->Initialize().ok());

  const security::JobSecret secret = SecretOf(job), outsider;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> attacks{0};
  std::vector<std::thread> fuzzers;
  for (int t = 0; t < 3; ++t) {
    fuzzers.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < 1000000 && !stop; ++i) {
        int target = static_cast<int>(rng() % 5);
        const security::JobSecret& as = rng() % 2 ? secret : outsider;
        if (target <= 1) {
          AbuseTcp(tcp, rng, static_cast<int>(rng() % 6), as);
        } else if (target <= 3) {
          AbuseShm(shm, rng, static_cast<int>(rng() % 10), as);
        } else {
          auto fd = ConnectTcp(grpc, Deadline(std::chrono::seconds(2)));
          if (fd.ok()) {
            auto junk = RandomBytes(rng, 1 + rng() % 2048);
            iovec iov{junk.data(), junk.size()};
            Deadline d(std::chrono::seconds(1));
            (void)WriteFully(fd->get(), &iov, 1, &d);
          }
        }
        ++attacks;
      }
    });
  }
  // The well-behaved trainer, for 30 s: every step checked against the pserver's own kernel.
  auto start = Now();
  int steps = 0;
  int64_t peak_rss = 0;
  std::vector<float> g(n);
  while (Now() - start < std::chrono::seconds(30) && steps < 1000000) {
    for (size_t i = 0; i < n; ++i) g[i] = 0.01f * static_cast<float>((i * 7 + steps) % 13) - 0.06f;
    Gradients grads;
    grads.Dense("w", g);
    grads.samples = 2;
    Status s = (*client)->PushPull(grads).Wait();
    ASSERT_TRUE(s.ok()) << "step " << steps << ": " << s;
    for (size_t b = 0; b < n; b += 256) {
      size_t len = std::min<size_t>(256, n - b);
      // Block layout of the pserver's state: per block, m then v.
      ApplyUpdate(cfg.optimizer, ref.data() + b, g.data() + b, 0.5f, len, state.data() + 2 * b,
                  state.data() + 2 * b + len, steps + 1);
    }
    ASSERT_EQ(std::memcmp(w.data(), ref.data(), n * sizeof(float)), 0) << "step " << steps << " differs";
    ++steps;
    if (steps % 50 == 0) peak_rss = std::max(peak_rss, RssKib(procs_[p]->pid()));
  }
  stop = true;
  for (auto& f : fuzzers) f.join();
  peak_rss = std::max(peak_rss, RssKib(procs_[p]->pid()));
  std::printf("%d good steps, %lld attacks, pserver peak RSS %lld KiB\n", steps,
              static_cast<long long>(attacks.load()), static_cast<long long>(peak_rss));
  EXPECT_TRUE(procs_[p]->running()) << "the pserver died";
  EXPECT_GT(steps, 50);
  EXPECT_GT(attacks.load(), 500);
  EXPECT_LT(peak_rss, 512 * 1024) << "memory grew with lying frames";
  std::string log = procs_[p]->Output();
  EXPECT_NE(log.find("closing the connection from 127.0.0.1:"), std::string::npos);
  EXPECT_NE(log.find("bad frame magic"), std::string::npos);
  EXPECT_NE(log.find("closing the connection from local pid"), std::string::npos);
  EXPECT_NE(log.find("not a memfd sealed"), std::string::npos);
  EXPECT_NE(log.find("a frame announced both a region and a window"), std::string::npos);
  EXPECT_NE(log.find("(64 bytes at offset 1048576) lies outside the 4096-byte window"), std::string::npos);
  EXPECT_NE(log.find("a request in a window came before any window"), std::string::npos);
  EXPECT_NE(log.find("reply room (64 bytes at offset 32) overlaps its payload (64 bytes at offset 0)"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::testing
