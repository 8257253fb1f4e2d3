// Memory stays bounded under bad input: a pserver's data plane given connections that each
// declare a 2 GiB frame, send 4 MB of it and close, and its HTTP port given requests that declare
// a 2^40-byte body, ends within 20 MB of where it started; the oversized HTTP bodies are refused
// at once with 413.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "harness/pids.h"
#include "harness/raw_http.h"
#include "ps/ps_fixture.h"
#include "transport/frame.h"
#include "transport/frame_auth.h"
#include "transport/stream_io.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

class MemoryTest : public PsTest {
 protected:
  // Starts one pserver that accepts frames up to 4 GiB; returns its pid and registration.
  nlohmann::json StartOne(const std::string& job) {
    MakeJob(job, 1);
    size_t i = StartPserver(job, 2, "tcp", {"--max-message-mb", "4096"});
    EXPECT_TRUE(WaitForPservers(job, 1));
    pid_ = procs_[i]->pid();
    auto kv = client_->Get(keys::Pserver(job, 0));
    return nlohmann::json::parse(kv->kvs[0].value);
  }

  // RSS settles (the pserver frees what closed connections held): waits until it is within
  // `kib` of `base`, and returns the last reading.
  int64_t SettledRss(int64_t base, int64_t kib) {
    int64_t now = RssKib(pid_);
    WaitUntil([&] { return (now = RssKib(pid_)) <= base + kib; }, seconds(20),
              std::chrono::milliseconds(100));
    return now;
  }

  static std::pair<std::string, int> HostPort(const std::string& url) {
    std::smatch m;
    EXPECT_TRUE(std::regex_match(url, m, std::regex("http://([0-9.]+):([0-9]+)/.*"))) << url;
    return {m[1].str(), std::stoi(m[2].str())};
  }

  pid_t pid_ = 0;
};

TEST_F(MemoryTest, FramesThatDeclareTwoGibibytesSendFourMegabytesAndCloseLeaveNothingBehind) {
  auto reg = StartOne("mem-frames");
  const std::string endpoint = reg["endpoints"]["tcp"].get<std::string>();
  const security::JobSecret secret = SecretOf("mem-frames");
  const int64_t before = RssKib(pid_);
  std::vector<char> chunk(4 << 20, 'x');
  int64_t peak = before;
  for (int round = 0; round < 5; ++round) {
    std::vector<UniqueFd> open;
    for (int c = 0; c < 10; ++c) {  // ten at a time, all holding their 4 MB
      auto fd = ConnectTcp(endpoint, Deadline(seconds(5)));
      ASSERT_TRUE(fd.ok()) << fd.status();
      // Signed with the job's secret, as a buggy trainer of the job would: past the MAC check.
      StreamReader reader;
      reader.Reset(fd->get());
      uint8_t greeting[kGreetingBytes];
      Deadline gd(seconds(5));
      ASSERT_TRUE(reader.Read(greeting, sizeof greeting, &gd).ok());
      auto auth = FrameAuth::FromGreeting(greeting, secret, endpoint);
      ASSERT_TRUE(auth.ok()) << auth.status();
      uint8_t pre[kFramePreambleBytes];
      EncodePreamble({FrameKind::kRequest, 0, 1, 16, size_t{2} << 30}, pre);
      std::string header(16, '\0');
      auth->Sign(pre, header);
      ASSERT_EQ(::send(fd->get(), pre, sizeof pre, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof pre));
      ASSERT_EQ(::send(fd->get(), header.data(), header.size(), MSG_NOSIGNAL), 16);
      size_t sent = 0;
      while (sent < chunk.size()) {
        ssize_t n = ::send(fd->get(), chunk.data() + sent, chunk.size() - sent, MSG_NOSIGNAL);
        ASSERT_GT(n, 0);
        sent += static_cast<size_t>(n);
      }
      open.push_back(std::move(*fd));
    }
    WaitUntil([&] { return RssKib(pid_) > before + 10 * 4096; }, seconds(5));
    peak = std::max(peak, RssKib(pid_));
    open.clear();  // all ten close
  }
  const int64_t after = SettledRss(before, 20 * 1024);
  std::printf(
      "pserver RSS: %lld KiB before, %lld KiB at the peak (10 connections holding 4 MB each), %lld KiB "
      "after 50 connections closed\n",
      static_cast<long long>(before), static_cast<long long>(peak), static_cast<long long>(after));
  EXPECT_LE(after, before + 20 * 1024) << "memory of closed connections was kept";
  EXPECT_TRUE(procs_[0]->running());
}

TEST_F(MemoryTest, HttpBodiesDeclaringATerabyteAreRefusedAtOnceWith413) {
  auto reg = StartOne("mem-http");
  auto [host, port] = HostPort(reg["metrics"].get<std::string>());
  const int64_t before = RssKib(pid_);
  for (int i = 0; i < 50; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::string reply =
        RawHttp(host, port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1099511627776",
                std::string(1 << 20, 'y'));
    ASSERT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << "request " << i << ": " << reply.substr(0, 200);
    EXPECT_LT(SecondsSince(t0), 10.0) << "the refusal waited for the body";
  }
  const int64_t after = SettledRss(before, 20 * 1024);
  std::printf("pserver RSS: %lld KiB before and %lld KiB after 50 requests declaring 2^40-byte bodies\n",
              static_cast<long long>(before), static_cast<long long>(after));
  EXPECT_LE(after, before + 20 * 1024);
}

}  // namespace
}  // namespace tessera::testing
