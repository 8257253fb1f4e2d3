// The test network's shaped links (NetLab::ShapeLink: tc tbf, and netem where the kernel has it):
// a link carries no more than its rate and adds its latency, each way, so a job's hosts can be
// joined as a cluster's are (1-25 Gbit/s, 50-200 us). Only lower bounds on time are asserted: a loaded
// machine can make a transfer slower, never faster than its link. Needs root; skipped with a message
// otherwise.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>

#include "data/data_fixture.h"
#include "harness/netns.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

class LinksTest : public TempDirTest {};

// Receives one connection's bytes; prints how many and how long they took from the accept.
constexpr const char* kSink = R"(
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 5001))
s.listen(1)
print('LISTENING', flush=True)
c, _ = s.accept()
t = time.monotonic()
n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    n += len(b)
print('GOT %d %.4f' % (n, time.monotonic() - t), flush=True)
)";

// Connects (printing how long that took: one round trip) and sends argv[2] MiB.
constexpr const char* kSource = R"(
import socket, sys, time
t = time.monotonic()
c = socket.create_connection((sys.argv[1], 5001), timeout=60)
print('CONNECT %.6f' % (time.monotonic() - t), flush=True)
buf = b'x' * (1 << 20)
for _ in range(int(sys.argv[2])):
    c.sendall(buf)
c.close()
)";

struct Transfer {
  double connect_s = -1, seconds = -1;
  long long bytes = -1;
};

Transfer Send(NetLab& lab, const std::string& dir, const std::string& from, const std::string& to, int mib) {
  static int n = 0;
  const std::string tag = std::to_string(++n) + "-" + from + "-" + to;
  Transfer r;
  Subprocess& sink = lab.Start(to, {"/usr/bin/python3", "-c", kSink}, dir + "/sink-" + tag + ".log");
  EXPECT_TRUE(sink.WaitForOutput("LISTENING", std::chrono::seconds(30))) << sink.Output();
  Subprocess& source = lab.Start(from, {"/usr/bin/python3", "-c", kSource, lab.Ip(to), std::to_string(mib)},
                                 dir + "/source-" + tag + ".log");
  auto code = source.Wait(std::chrono::seconds(120));
  EXPECT_TRUE(code.has_value() && *code == 0) << source.Output();
  EXPECT_TRUE(sink.Wait(std::chrono::seconds(60)).has_value()) << sink.Output();
  std::smatch m;
  const std::string out = source.Output(), got = sink.Output();
  if (std::regex_search(out, m, std::regex("CONNECT ([0-9.]+)"))) r.connect_s = std::stod(m[1]);
  if (std::regex_search(got, m, std::regex("GOT (\\d+) ([0-9.]+)"))) {
    r.bytes = std::stoll(m[1]);
    r.seconds = std::stod(m[2]);
  }
  return r;
}

TEST_F(LinksTest, AShapedLinkCarriesNoMoreThanItsRateEachWay) {
  NetLab lab;
  std::string why;
  if (!lab.Open(&why)) GTEST_SKIP() << "network namespaces cannot be created here (needs root): " << why;
  ASSERT_TRUE(lab.AddHost("a", 1));
  ASSERT_TRUE(lab.AddHost("b", 2));
  const Transfer plain = Send(lab, dir_, "a", "b", 12);
  ASSERT_EQ(plain.bytes, 12 << 20);
  // At 100 Mbit/s, 12 MiB (100.7 Mbit) take at least a second, whichever way they go.
  ASSERT_TRUE(lab.ShapeLink("a", 100));
  ASSERT_TRUE(lab.ShapeLink("b", 100));
  const Transfer there = Send(lab, dir_, "a", "b", 12), back = Send(lab, dir_, "b", "a", 12);
  ASSERT_EQ(there.bytes, 12 << 20);
  ASSERT_EQ(back.bytes, 12 << 20);
  std::printf("12 MiB: %.3f s unshaped; at 100 Mbit/s %.3f s from a to b and %.3f s back\n", plain.seconds,
              there.seconds, back.seconds);
  EXPECT_GE(there.seconds, 0.9) << "12 MiB went faster than 100 Mbit/s";
  EXPECT_GE(back.seconds, 0.9) << "12 MiB went faster than 100 Mbit/s";
  // Shaped again, to 1 Gbit/s: the rate is replaced, not stacked.
  ASSERT_TRUE(lab.ShapeLink("a", 1000));
  ASSERT_TRUE(lab.ShapeLink("b", 1000));
  const Transfer fast = Send(lab, dir_, "a", "b", 24);
  ASSERT_EQ(fast.bytes, 24 << 20);
  std::printf("24 MiB at 1 Gbit/s: %.3f s\n", fast.seconds);
  EXPECT_GE(fast.seconds, 0.18) << "24 MiB went faster than 1 Gbit/s";
  std::string qdiscs;
  ASSERT_EQ(NetLab::Sh("tc -n " + lab.Ns("sw") + " qdisc show dev " + lab.Port("b"), &qdiscs), 0) << qdiscs;
  EXPECT_NE(qdiscs.find("rate 1Gbit"), std::string::npos) << qdiscs;
  EXPECT_EQ(qdiscs.find("tbf"), qdiscs.rfind("tbf")) << "one token bucket: " << qdiscs;
  // Unshaped again: no token bucket left on either end, and taking none off is fine too.
  ASSERT_TRUE(lab.Unshape("b"));
  ASSERT_EQ(NetLab::Sh("tc -n " + lab.Ns("sw") + " qdisc show dev " + lab.Port("b"), &qdiscs), 0) << qdiscs;
  EXPECT_EQ(qdiscs.find("tbf"), std::string::npos) << qdiscs;
  ASSERT_EQ(NetLab::Sh("tc -n " + lab.Ns("b") + " qdisc show", &qdiscs), 0) << qdiscs;
  EXPECT_EQ(qdiscs.find("tbf"), std::string::npos) << qdiscs;
  EXPECT_TRUE(lab.Unshape("b"));
  EXPECT_FALSE(lab.ShapeLink("a", 0));
  EXPECT_FALSE(lab.ShapeLink("a", 100, -1));
}

// Added latency needs the kernel's netem qdisc; where it is missing (this project's CI VM) the
// test says so and skips.
TEST_F(LinksTest, AShapedLinkAddsItsLatencyEachWay) {
  NetLab lab;
  std::string why;
  if (!lab.Open(&why)) GTEST_SKIP() << "network namespaces cannot be created here (needs root): " << why;
  if (!lab.HasNetem())
    GTEST_SKIP() << "this kernel has no netem qdisc (sch_netem): links get rates, not latency";
  ASSERT_TRUE(lab.AddHost("a", 1));
  ASSERT_TRUE(lab.AddHost("b", 2));
  ASSERT_TRUE(lab.ShapeLink("a", 1000, 500));
  ASSERT_TRUE(lab.ShapeLink("b", 1000, 500));
  const Transfer t = Send(lab, dir_, "a", "b", 1);
  // A connection takes a round trip: 4 delays of 500 us (each link, each way).
  EXPECT_GE(t.connect_s, 0.0018) << "a connection took less than a round trip of 4 x 500 us";
}

}  // namespace
}  // namespace tessera::testing
