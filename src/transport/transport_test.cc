// Every data-plane transport (grpc, tcp, shm) in one process against the same handler: payloads
// gathered from several buffers and scattered into several, replies sent later from another
// thread, a reply too large for the buffers, a request never answered (deadline), a dropped
// responder, a server shut down under a client, and (tcp, shm) the buffers reused from one
// message to the next instead of allocated. Each runs with and without a job secret; then a
// secured server refuses, counts and never handles a request without the secret or with another
// job's, and a secured client refuses a server without it. Over TLS (tcp and grpc, with a job
// secret too) the same suite passes, and a peer whose certificate is not the job's is refused
// both ways.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

#include "security/certs.h"
#include "transport/frame_auth.h"
#include "transport/stream_io.h"
#include "transport/transport_factory.h"

namespace tessera {
namespace {

// Replies "re:" + header with the request's payload reversed in chunks, or as the header asks:
//   "big": 16 bytes more payload than was sent;  "never": keeps the responder, never answers;
//   "drop": drops the responder;  "later": answers from another thread after 20 ms;
//   "lent": writes all over 64 MiB of lent reply memory from another thread for half a second
//   (the caller has gone by then), then answers.
class TestHandler : public RequestHandler {
 public:
  ~TestHandler() override { Join(); }
  void Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> r) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      request_payloads_.insert(payload.data);
    }
    std::string h(header);
    if (h == "watched") {
      std::lock_guard<std::mutex> lock(mu_);
      handled_whole_ = watcher_.seen.size() == payload.size &&
                       std::memcmp(watcher_.seen.data(), payload.data, payload.size) == 0;
    }
    if (h == "made") {  // the payload reversed as ever, made as it is sent
      MutableBuffer out = r->Allocate(payload.size);
      auto filler = std::make_unique<ReplyFiller>();
      filler->in = std::string(static_cast<const char*>(payload.data), payload.size);
      filler->out = static_cast<char*>(out.data);
      filler->handler = this;
      r->SendMade("re:made", out, std::move(filler));
      return;
    }
    if (h == "never") {
      std::lock_guard<std::mutex> lock(mu_);
      kept_.push_back(std::move(r));
      return;
    }
    if (h == "drop") return;
    if (h == "lent") {
      MutableBuffer out = r->Allocate(size_t{64} << 20);
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([r = std::move(r), out]() mutable {
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
        for (int i = 0; i < 1000 && std::chrono::steady_clock::now() < end; ++i)
          std::memset(out.data, i, out.size);
        r->Send("re:lent", {});
      });
      return;
    }
    size_t extra = h == "big" ? 16 : 0;
    MutableBuffer out = r->Allocate(payload.size + extra);
    {
      std::lock_guard<std::mutex> lock(mu_);
      reply_buffers_.insert(out.data);
    }
    const char* in = static_cast<const char*>(payload.data);
    for (size_t i = 0; i < payload.size; ++i)
      static_cast<char*>(out.data)[i] = static_cast<char>(in[i] ^ 0x5a);
    std::memset(static_cast<char*>(out.data) + payload.size, 7, extra);
    ConstBuffer b{out.data, out.size};
    std::string reply = "re:" + h;
    if (h == "later") {
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([r = std::move(r), b, reply]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // answered after Handle returned
        r->Send(reply, {&b, 1});
      });
      return;
    }
    r->Send(reply, b.size ? std::span<const ConstBuffer>(&b, 1) : std::span<const ConstBuffer>{});
  }
  // Answers nothing it kept (the transports fail those calls); gRPC's server waits for them.
  void DropKept() {
    std::lock_guard<std::mutex> lock(mu_);
    kept_.clear();
  }
  void Join() {
    std::vector<std::thread> t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      t.swap(threads_);
    }
    for (auto& x : t) x.join();
  }
  size_t distinct_reply_buffers() {
    std::lock_guard<std::mutex> lock(mu_);
    return reply_buffers_.size();
  }
  size_t distinct_request_payloads() {
    std::lock_guard<std::mutex> lock(mu_);
    return request_payloads_.size();
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    reply_buffers_.clear();
    request_payloads_.clear();
  }

  // "made": its reply made as it is sent (Responder::SendMade); what it was asked, and whether it
  // is gone (the transport keeps it until the reply is written).
  struct ReplyFiller : PayloadFiller {
    std::string in;
    char* out = nullptr;
    size_t made = 0;
    TestHandler* handler = nullptr;
    void Fill(size_t bytes) override {
      {
        std::lock_guard<std::mutex> lock(handler->mu_);
        handler->fills_.push_back(bytes);
      }
      for (; made < bytes && made < in.size(); ++made) out[made] = static_cast<char>(in[made] ^ 0x5a);
    }
    ~ReplyFiller() override {
      std::lock_guard<std::mutex> lock(handler->mu_);
      ++handler->fillers_gone_;
    }
  };
  std::vector<size_t> fills() {
    std::lock_guard<std::mutex> lock(mu_);
    return fills_;
  }
  int fillers_gone() {
    std::lock_guard<std::mutex> lock(mu_);
    return fillers_gone_;
  }

  // "watched": its payload as it comes (Watch), each time checked against what has come.
  struct PayloadWatcher : RequestWatcher {
    std::string header;
    size_t expected = 0;
    std::vector<size_t> told;
    std::string seen;          // the payload's bytes as told, copied as they came
    bool moved_bytes = false;  // a byte told before was not there any more
    std::mutex* mu = nullptr;  // the handler's: the test reads what was told from its thread
    void Arrived(const char* payload, size_t bytes) override {
      std::lock_guard<std::mutex> lock(*mu);
      told.push_back(bytes);
      moved_bytes = moved_bytes || (!seen.empty() && std::memcmp(payload, seen.data(), seen.size()) != 0);
      if (bytes > seen.size()) seen.append(payload + seen.size(), bytes - seen.size());
    }
  };
  RequestWatcher* Watch(std::string_view header, size_t payload_bytes) override {
    if (header != "watched") return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    watcher_ = PayloadWatcher{};
    watcher_.mu = &mu_;
    watcher_.header = header;
    watcher_.expected = payload_bytes;
    ++watched_;
    return &watcher_;
  }
  int watched() {
    std::lock_guard<std::mutex> lock(mu_);
    return watched_;
  }
  PayloadWatcher watcher() {
    std::lock_guard<std::mutex> lock(mu_);
    return watcher_;
  }
  // Whether the last "watched" request's payload had all come, as told, when it was handled.
  bool handled_whole() {
    std::lock_guard<std::mutex> lock(mu_);
    return handled_whole_;
  }

 private:
  std::vector<size_t> fills_;
  int fillers_gone_ = 0;
  PayloadWatcher watcher_;  // the connection's thread only: Watch, Arrived, Handle
  int watched_ = 0;
  bool handled_whole_ = false;
  std::mutex mu_;
  std::vector<std::unique_ptr<Responder>> kept_;
  std::vector<std::thread> threads_;
  std::set<const void*> reply_buffers_, request_payloads_;
};

struct Param {
  TransportKind kind;
  bool secured;
  bool tls = false;
  bool busy_poll = false;  // both ends poll before they sleep (TransportOptions::busy_poll)
};

// A node's TLS material as `tessera certs` makes it, in memory: a certificate signed by `ca`
// naming `cert_job`, for a process of `job`.
std::shared_ptr<const security::TlsConfig> NodeTls(const security::Pem& ca, const std::string& job,
                                                   const std::string& cert_job = "") {
  auto cert = security::MakeNodeCert(ca, cert_job.empty() ? job : cert_job, "node", {"127.0.0.1"}, 1);
  EXPECT_TRUE(cert.ok()) << cert.status();
  auto c = std::make_shared<security::TlsConfig>();
  c->job = job;
  c->ca_pem = ca.cert;
  c->cert_pem = cert->cert;
  c->key_pem = cert->key;
  return c;
}

// The test job's CA, made once.
const security::Pem& JobCa() {
  static const security::Pem ca = *security::MakeJobCa("tj", 1);
  return ca;
}

class TransportTest : public ::testing::TestWithParam<Param> {
 protected:
  TransportKind kind() const { return GetParam().kind; }
  void SetUp() override {
    if (GetParam().secured) {
      options_.secret = security::JobSecret::Generate();
      options_.auth_refused = &refused_;
    }
    if (GetParam().tls) options_.tls = NodeTls(JobCa(), "tj");
    if (GetParam().busy_poll) options_.busy_poll = std::chrono::milliseconds(2);
    server_ = NewServerTransport(kind(), options_);
    ASSERT_TRUE(server_->Start("127.0.0.1", 0, &handler_).ok());
    conn_ = NewClientConnection(kind(), server_->endpoint(), options_);
  }
  void TearDown() override {
    conn_.reset();
    handler_.DropKept();
    server_->Shutdown();
    handler_.Join();
  }

  // Sends `n` bytes gathered from three buffers, receives into two; checks every byte.
  void RoundTrip(size_t n, const std::string& header = "x") {
    std::vector<char> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 131 + n);
    size_t a = n / 3, b = n / 2;
    ConstBuffer out[3] = {{data.data(), a}, {data.data() + a, b - a}, {data.data() + b, n - b}};
    std::vector<char> got(n + 1, 0);
    MutableBuffer in[2] = {{got.data(), n / 4}, {got.data() + n / 4, n - n / 4 + 1}};
    auto r = conn_->Call(header, out, in, std::chrono::seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->header, "re:" + header);
    ASSERT_EQ(r->payload_bytes, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], static_cast<char>(data[i] ^ 0x5a)) << "byte " << i << " of " << n;
    }
    EXPECT_EQ(got[n], 0) << "wrote past the payload";
  }

  metrics::Counter refused_;
  TransportOptions options_;
  TestHandler handler_;
  std::unique_ptr<ServerTransport> server_;
  std::unique_ptr<ClientConnection> conn_;
};

TEST_P(TransportTest, PayloadsOfEverySizeArriveWhole) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{4096}, size_t{65537}, (size_t{1} << 20) + 3,
                   size_t{20} << 20, size_t{4096}}) {
    RoundTrip(n);
  }
}

TEST_P(TransportTest, LargeHeadersArriveWhole) { RoundTrip(100, std::string(300000, 'h')); }

// Over tcp a reply's watcher (MutableBuffer::watcher) is told its header before any payload
// byte is written, then how far the payload has come, each time with every byte before that
// point in place, growing to all of it. The other transports do not tell.
TEST_P(TransportTest, AReplyTellsItsWatcherHowFarItHasComeOverTcp) {
  constexpr size_t n = size_t{20} << 20;
  std::vector<char> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 131 + 7);
  std::vector<char> got(n, 0);
  struct Watcher : ReplyWatcher {
    const std::vector<char>* data;
    const std::vector<char>* got;
    int begun = 0;
    std::string header;
    size_t payload = 0;
    bool written_before_begin = false, wrong = false;
    std::vector<size_t> told;
    void Begin(std::string_view h, size_t bytes) override {
      ++begun;
      header = h;
      payload = bytes;
      written_before_begin = std::any_of(got->begin(), got->end(), [](char c) { return c != 0; });
    }
    void Arrived(size_t bytes) override {
      told.push_back(bytes);
      for (size_t i : {size_t{0}, bytes / 2, bytes - 1})  // what it says has come has come
        wrong = wrong || (*got)[i] != static_cast<char>((*data)[i] ^ 0x5a);
    }
  } watcher;
  watcher.data = &data;
  watcher.got = &got;
  ConstBuffer out{data.data(), n};
  MutableBuffer in{got.data(), n, nullptr, &watcher};
  auto r = conn_->Call("x", {&out, 1}, {&in, 1}, std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->payload_bytes, n);
  if (kind() != TransportKind::kTcp) {
    EXPECT_EQ(watcher.begun, 0);
    EXPECT_TRUE(watcher.told.empty());
    return;
  }
  EXPECT_EQ(watcher.begun, 1);
  EXPECT_EQ(watcher.header, "re:x");
  EXPECT_EQ(watcher.payload, n);
  EXPECT_FALSE(watcher.written_before_begin);
  EXPECT_FALSE(watcher.wrong);
  ASSERT_GE(watcher.told.size(), 2u) << "20 MB in one receive";
  EXPECT_TRUE(std::is_sorted(watcher.told.begin(), watcher.told.end()));
  EXPECT_GT(watcher.told.front(), 0u);
  EXPECT_EQ(watcher.told.back(), n);
}

// A payload made as it is sent (ConstBuffer::filler) arrives whole. Over tcp it is made a run at
// a time, each run's bytes made before any of them is read (a byte sent before it was made would
// arrive as the zero it was); the other transports make all of it first, in one Fill.
TEST_P(TransportTest, APayloadMadeAsItIsSentArrivesWhole) {
  constexpr size_t n = (size_t{5} << 20) + 3;
  std::vector<char> want(n), data(n, 0), got(n, 0);
  for (size_t i = 0; i < n; ++i) want[i] = static_cast<char>(i * 131 + 7);
  struct Filler : PayloadFiller {
    const std::vector<char>* want;
    std::vector<char>* data;
    size_t made = 0;
    std::vector<size_t> asked;
    void Fill(size_t bytes) override {
      asked.push_back(bytes);
      for (; made < bytes; ++made) (*data)[made] = (*want)[made];
    }
  } filler;
  filler.want = &want;
  filler.data = &data;
  ConstBuffer out{data.data(), n, &filler};
  MutableBuffer in{got.data(), n};
  auto r = conn_->Call("made", {&out, 1}, {&in, 1}, std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->payload_bytes, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<char>(want[i] ^ 0x5a)) << "byte " << i;
  ASSERT_FALSE(filler.asked.empty());
  EXPECT_TRUE(std::is_sorted(filler.asked.begin(), filler.asked.end()));
  EXPECT_EQ(filler.asked.back(), n);
  if (kind() == TransportKind::kTcp) {
    EXPECT_GE(filler.asked.size(), 5u) << "5 MB in runs of at most 1 MiB";
  } else {
    EXPECT_EQ(filler.asked.size(), 1u);
  }
  // The next call, without a filler, is unchanged.
  RoundTrip(1000);
}

// Over tcp the handler's watcher (RequestHandler::Watch) is asked for once the header is read,
// then told how far the payload has come, growing to all of it, each time with every byte before
// that point in place, before the request is handled. The other transports do not ask.
TEST_P(TransportTest, ARequestTellsItsHandlersWatcherHowFarItHasComeOverTcp) {
  constexpr size_t n = (size_t{6} << 20) + 5;
  std::vector<char> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 131 + 7);
  std::vector<char> got(n);
  ConstBuffer out{data.data(), n};
  MutableBuffer in{got.data(), n};
  auto r = conn_->Call("watched", {&out, 1}, {&in, 1}, std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->payload_bytes, n);
  if (kind() != TransportKind::kTcp) {
    EXPECT_EQ(handler_.watched(), 0);
    return;
  }
  ASSERT_EQ(handler_.watched(), 1);
  const auto w = handler_.watcher();
  EXPECT_EQ(w.header, "watched");
  EXPECT_EQ(w.expected, n);
  ASSERT_GE(w.told.size(), 6u) << "6 MB in runs of 256 KiB";
  EXPECT_TRUE(std::is_sorted(w.told.begin(), w.told.end()));
  EXPECT_EQ(w.told.back(), n);
  EXPECT_FALSE(w.moved_bytes);
  EXPECT_TRUE(handler_.handled_whole());
  // A request its handler does not watch is read as before.
  RoundTrip(1000);
  EXPECT_EQ(handler_.watched(), 1);
}

// A reply made as it is sent (Responder::SendMade) arrives whole. Over tcp the connection's
// thread makes it a run at a time as it writes it; the other transports make all of it first.
// The filler is kept until the reply is written, then dropped.
TEST_P(TransportTest, AReplyMadeAsItIsSentArrivesWhole) {
  constexpr size_t n = (size_t{5} << 20) + 7;
  std::vector<char> data(n), got(n, 0);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 131 + 7);
  ConstBuffer out{data.data(), n};
  MutableBuffer in{got.data(), n};
  auto r = conn_->Call("made", {&out, 1}, {&in, 1}, std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->header, "re:made");
  ASSERT_EQ(r->payload_bytes, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<char>(data[i] ^ 0x5a)) << "byte " << i;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (handler_.fillers_gone() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(handler_.fillers_gone(), 1);
  const std::vector<size_t> fills = handler_.fills();
  ASSERT_FALSE(fills.empty());
  EXPECT_TRUE(std::is_sorted(fills.begin(), fills.end()));
  EXPECT_EQ(fills.back(), n);
  if (kind() == TransportKind::kTcp) {
    EXPECT_GE(fills.size(), 5u) << "5 MB in runs of at most 1 MiB";
  } else {
    EXPECT_EQ(fills.size(), 1u);
  }
  RoundTrip(1000);
}

TEST_P(TransportTest, RepliesSentLaterFromAnotherThreadArrive) {
  for (int i = 0; i < 5; ++i) RoundTrip(10000, "later");
}

TEST_P(TransportTest, AReplyLargerThanTheBuffersIsDataLossAndTheNextCallWorks) {
  std::vector<float> data(100, 1.0f), got(100);
  ConstBuffer out{data.data(), 400};
  MutableBuffer in{got.data(), 400};
  auto r = conn_->Call("big", {&out, 1}, {&in, 1}, std::chrono::seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find("416 payload bytes"), std::string::npos) << r.status();
  RoundTrip(1000);
}

TEST_P(TransportTest, AnUnansweredRequestTimesOutAndTheNextCallWorks) {
  auto r = conn_->Call("never", {}, {}, std::chrono::milliseconds(300));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  RoundTrip(1000);
}

TEST_P(TransportTest, AbortFromAnotherThreadEndsAWaitingCallAtOnceAndEveryLaterOne) {
  RoundTrip(1000);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    conn_->Abort();
  });
  auto start = std::chrono::steady_clock::now();
  auto r = conn_->Call("never", {}, {}, std::chrono::seconds(60));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("abandoned"), std::string::npos) << r.status();
  EXPECT_LT(took, 30.0) << "the call waited for its deadline";
  auto again = conn_->Call("x", {}, {}, std::chrono::seconds(5));
  ASSERT_FALSE(again.ok()) << "an aborted connection is not used again";
  EXPECT_NE(again.status().message().find("abandoned"), std::string::npos) << again.status();
  handler_.DropKept();
}

TEST_P(TransportTest, ADroppedResponderFailsTheCallAsUnavailable) {
  auto r = conn_->Call("drop", {}, {}, std::chrono::seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  RoundTrip(1000);
}

// A handler may still be writing a reply into the memory it was lent when the client goes away
// and the server closes the connection: that memory stays until the responder is gone.
TEST_P(TransportTest, LentReplyMemoryOutlivesAConnectionClosedUnderIt) {
  auto r = conn_->Call("lent", {}, {}, std::chrono::milliseconds(100));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  conn_.reset();    // the client goes: the server closes its end while the handler writes
  handler_.Join();  // no crash: the writes landed in memory still owned
  conn_ = NewClientConnection(kind(), server_->endpoint(), options_);
  RoundTrip(1000);
}

TEST_P(TransportTest, AServerThatShutsDownFailsCallsAsUnavailable) {
  RoundTrip(1000);
  server_->Shutdown();
  auto r = conn_->Call("x", {}, {}, std::chrono::seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
}

TEST_P(TransportTest, ManyClientsAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto c = NewClientConnection(kind(), server_->endpoint(), options_);
      std::vector<char> data(50000 + t), got(50000 + t);
      for (int i = 0; i < 50; ++i) {
        ConstBuffer out{data.data(), data.size()};
        MutableBuffer in{got.data(), got.size()};
        auto r = c->Call("x", {&out, 1}, {&in, 1}, std::chrono::seconds(30));
        if (!r.ok() || r->payload_bytes != data.size() || got[0] != static_cast<char>(data[0] ^ 0x5a))
          ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(TransportTest, BuffersAreReusedFromOneMessageToTheNext) {
  if (kind() == TransportKind::kGrpc) GTEST_SKIP() << "gRPC allocates a message per call";
  RoundTrip(size_t{8} << 20);  // grow once
  handler_.Reset();
  for (int i = 0; i < 20; ++i) RoundTrip((size_t{8} << 20) - i * 4096);
  EXPECT_EQ(handler_.distinct_reply_buffers(), 1u);
  EXPECT_EQ(handler_.distinct_request_payloads(), 1u);
}

TEST_P(TransportTest, OversizedMessagesAreRefusedByTheSenderAndByTheReceiver) {
  if (kind() == TransportKind::kGrpc) GTEST_SKIP() << "gRPC has its own message limits";
  std::vector<char> big((size_t{2} << 20) + 1, 1);
  ConstBuffer b{big.data(), big.size()};
  // A client that knows the limit refuses to send at once (retrying would not help).
  TransportOptions small = options_;
  small.limits.max_payload = size_t{2} << 20;
  auto careful = NewClientConnection(kind(), server_->endpoint(), small);
  auto r = careful->Call("x", {&b, 1}, {}, std::chrono::seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("larger than the maximum"), std::string::npos) << r.status();
  // A server with that limit closes the connection of a client that sends more anyway.
  TestHandler handler;
  auto strict = NewServerTransport(kind(), small);
  ASSERT_TRUE(strict->Start("127.0.0.1", 0, &handler).ok());
  auto eager = NewClientConnection(kind(), strict->endpoint(), options_);
  auto refused = eager->Call("x", {&b, 1}, {}, std::chrono::seconds(10));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status();
  ConstBuffer ok{big.data(), size_t{2} << 20};
  std::vector<char> back(size_t{2} << 20);
  MutableBuffer in{back.data(), back.size()};
  auto fine = eager->Call("x", {&ok, 1}, {&in, 1}, std::chrono::seconds(10));
  EXPECT_TRUE(fine.ok()) << fine.status();  // reconnected; a message at the limit passes
  strict->Shutdown();
}

// The same fixture, with a job secret on both sides.
class TransportAuthTest : public TransportTest {};

TEST_P(TransportAuthTest, WithoutTheJobSecretOrWithAnotherJobsARequestIsRefusedAndNeverHandled) {
  RoundTrip(1000);
  handler_.Reset();
  TransportOptions none = options_;
  none.secret = security::JobSecret();
  TransportOptions other = options_;
  other.secret = security::JobSecret::Generate();
  std::vector<char> data(4096, 3), got(4096);
  ConstBuffer out{data.data(), data.size()};
  MutableBuffer in{got.data(), got.size()};
  for (const auto* o : {&none, &other, &none, &other}) {
    auto intruder = NewClientConnection(kind(), server_->endpoint(), *o);
    auto start = std::chrono::steady_clock::now();
    auto r = intruder->Call("x", {&out, 1}, {&in, 1}, std::chrono::seconds(30));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10))
        << "a refusal is not retried";
    EXPECT_NE(r.status().message().find(o == &none ? "secret" : "refused"), std::string::npos) << r.status();
  }
  EXPECT_EQ(handler_.distinct_request_payloads(), 0u) << "a refused request reached the handler";
  // Without a secret a tcp/shm client learns it from the greeting and sends nothing; the two
  // with another job's secret are refused and counted.
  EXPECT_GE(refused_.value(), 2.0);
  RoundTrip(1000);  // the job's own client is unaffected
}

TEST_P(TransportAuthTest, AClientWithTheJobSecretRefusesAServerWithoutIt) {
  TestHandler handler;
  auto open_server = NewServerTransport(kind(), TransportOptions{});
  ASSERT_TRUE(open_server->Start("127.0.0.1", 0, &handler).ok());
  auto c = NewClientConnection(kind(), open_server->endpoint(), options_);
  auto r = c->Call("x", {}, {}, std::chrono::seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status();
  EXPECT_NE(r.status().message().find(GetParam().tls ? "does not speak TLS" : "not a pserver of this job"),
            std::string::npos)
      << r.status();
  open_server->Shutdown();
  handler.Join();
}

// A job's TLS server and client, and peers that are not the job's.
class TransportTlsTest : public TransportTest {
 protected:
  // Calls the server as a client with `tls` (and the job's secret); the error it gets.
  Status CallWith(std::shared_ptr<const security::TlsConfig> tls) {
    TransportOptions o = options_;
    o.tls = std::move(tls);
    auto c = NewClientConnection(kind(), server_->endpoint(), o);
    auto start = std::chrono::steady_clock::now();
    auto r = c->Call("x", {}, {}, std::chrono::seconds(20));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10))
        << "a refusal is not retried";
    return r.ok() ? Status::OK() : r.status();
  }
};

TEST_P(TransportTlsTest, AClientWhoseCertificateIsNotTheJobsIsRefusedAndNeverHandled) {
  RoundTrip(1000);
  handler_.Reset();
  const double before = refused_.value();
  const security::Pem other_ca = *security::MakeJobCa("tj", 1);  // same job name, another CA
  for (auto tls : {NodeTls(other_ca, "tj"), NodeTls(JobCa(), "tj", "other")}) {
    Status s = CallWith(tls);
    ASSERT_FALSE(s.ok());
    if (kind() == TransportKind::kTcp) {
      // Another CA: each end refuses the other's; another job's name: the server refuses it.
      EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s;
      EXPECT_NE(s.message().find("TLS certificate"), std::string::npos) << s;
    } else {
      // gRPC reports a failed handshake as Unavailable, and a certificate for another job's
      // name (checked per call) as Unauthenticated.
      EXPECT_TRUE(s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kUnauthenticated) << s;
    }
  }
  EXPECT_EQ(handler_.distinct_request_payloads(), 0u) << "a refused client's request reached the handler";
  if (kind() == TransportKind::kTcp) {
    // The server counts a refusal when its side of the handshake fails, which may come just after
    // the client gave up (the client refused the other CA first): wait for it, with a deadline.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (refused_.value() - before < 2.0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_GE(refused_.value() - before, 2.0) << "refusals are counted";
  }
  RoundTrip(1000);  // the job's own client is unaffected
}

TEST_P(TransportTlsTest, AServerWhoseCertificateIsNotTheJobsIsRefused) {
  TestHandler handler;
  TransportOptions o = options_;
  o.tls = NodeTls(*security::MakeJobCa("tj", 1), "tj");
  auto impostor = NewServerTransport(kind(), o);
  ASSERT_TRUE(impostor->Start("127.0.0.1", 0, &handler).ok());
  auto c = NewClientConnection(kind(), impostor->endpoint(), options_);
  auto r = c->Call("x", {}, {}, std::chrono::seconds(10));
  ASSERT_FALSE(r.ok());
  if (kind() == TransportKind::kTcp) {
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status();
    EXPECT_NE(r.status().message().find("presented a TLS certificate that is not this job's"),
              std::string::npos)
        << r.status();
  }
  EXPECT_EQ(handler.distinct_request_payloads(), 0u);
  impostor->Shutdown();
  handler.Join();
}

TEST_P(TransportTlsTest, TlsAndPlaintextEndsDoNotTalk) {
  if (kind() != TransportKind::kTcp) GTEST_SKIP() << "gRPC's own handshake covers this";
  // A TLS client of a plaintext server learns at once that it does not speak TLS.
  TestHandler handler;
  TransportOptions plain = options_;
  plain.tls = nullptr;
  auto open_server = NewServerTransport(kind(), plain);
  ASSERT_TRUE(open_server->Start("127.0.0.1", 0, &handler).ok());
  auto c = NewClientConnection(kind(), open_server->endpoint(), options_);
  auto r = c->Call("x", {}, {}, std::chrono::seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status();
  EXPECT_NE(r.status().message().find("does not speak TLS"), std::string::npos) << r.status();
  open_server->Shutdown();
  handler.Join();
  // A plaintext client of the TLS server gets no greeting, and its request is never handled.
  handler_.Reset();
  auto p = NewClientConnection(kind(), server_->endpoint(), plain);
  auto pr = p->Call("x", {}, {}, std::chrono::seconds(1));
  EXPECT_FALSE(pr.ok());
  EXPECT_EQ(handler_.distinct_request_payloads(), 0u);
}

// Over raw TCP: a signed frame sent again on its connection, or on another one, is refused.
TEST(TransportReplayTest, ASignedFrameReplayedOnItsConnectionOrAnotherIsRefused) {
  metrics::Counter refused;
  TransportOptions o;
  o.secret = security::JobSecret::Generate();
  o.auth_refused = &refused;
  TestHandler handler;
  auto server = NewServerTransport(TransportKind::kTcp, o);
  ASSERT_TRUE(server->Start("127.0.0.1", 0, &handler).ok());
  // Opens a raw connection and returns the signed bytes of request 1 ("x", no payload).
  auto open = [&](UniqueFd* fd, StreamReader* reader, std::optional<FrameAuth>* auth) {
    auto c = ConnectTcp(server->endpoint(), Deadline(std::chrono::seconds(5)));
    ASSERT_TRUE(c.ok()) << c.status();
    *fd = std::move(*c);
    reader->Reset(fd->get());
    uint8_t greeting[kGreetingBytes];
    Deadline d(std::chrono::seconds(5));
    ASSERT_TRUE(reader->Read(greeting, sizeof greeting, &d).ok());
    auto a = FrameAuth::FromGreeting(greeting, o.secret, "test");
    ASSERT_TRUE(a.ok()) << a.status();
    auth->emplace(std::move(*a));
  };
  auto send = [](int fd, const uint8_t* pre) {
    std::string bytes(reinterpret_cast<const char*>(pre), kFramePreambleBytes);
    bytes += "x";
    iovec iov{bytes.data(), bytes.size()};
    Deadline d(std::chrono::seconds(5));
    return WriteFully(fd, &iov, 1, &d);
  };
  auto reply_flags = [](StreamReader& reader) -> int {
    uint8_t pre[kFramePreambleBytes];
    Deadline d(std::chrono::seconds(10));
    if (!reader.Read(pre, sizeof pre, &d).ok()) return -1;
    return pre[5];
  };
  UniqueFd fd;
  StreamReader reader;
  std::optional<FrameAuth> auth;
  open(&fd, &reader, &auth);
  uint8_t pre[kFramePreambleBytes];
  EncodePreamble({FrameKind::kRequest, 0, 1, 1, 0}, pre);
  auth->Sign(pre, "x");
  ASSERT_TRUE(send(fd.get(), pre).ok());
  EXPECT_EQ(reply_flags(reader), 0) << "the genuine request is answered";
  uint8_t header[4];
  Deadline d(std::chrono::seconds(5));
  ASSERT_TRUE(reader.Read(header, 4, &d).ok());  // "re:x"
  ASSERT_TRUE(send(fd.get(), pre).ok());
  EXPECT_EQ(reply_flags(reader), kFrameFlagRefused) << "the same frame again on its connection";

  UniqueFd fd2;
  StreamReader reader2;
  std::optional<FrameAuth> auth2;
  open(&fd2, &reader2, &auth2);
  ASSERT_TRUE(send(fd2.get(), pre).ok());
  EXPECT_EQ(reply_flags(reader2), kFrameFlagRefused) << "the frame replayed on another connection";
  EXPECT_EQ(refused.value(), 2.0);
  server->Shutdown();
  handler.Join();
}

// Busy polling's wait: over at once when something is there to read (or the peer closed), and
// only after its time when nothing comes.
TEST(SpinUntilReadableTest, ReturnsWhenReadableOrClosedElseAfterItsTime) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  auto readable = [&] {
    pollfd p{a.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  };
  const auto spin = std::chrono::milliseconds(20);
  auto t0 = std::chrono::steady_clock::now();
  const SpinCounters before = SpinCountersNow();
  SpinUntilReadable(a.get(), spin);
  const SpinCounters after = SpinCountersNow();
  // Early only when it stepped aside (spin_governor.h): it was backing off, or lost its core.
  if (after.skipped == before.skipped && after.back_offs == before.back_offs) {
    EXPECT_GE(std::chrono::steady_clock::now() - t0, spin) << "returned before its time with nothing to read";
  }
  EXPECT_FALSE(readable());

  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(::write(b.get(), "x", 1), 1);
  });
  SpinUntilReadable(a.get(), std::chrono::seconds(60));  // returns with the byte, long before 60 s
  writer.join();
  EXPECT_TRUE(readable());
  char c;
  ASSERT_EQ(::read(a.get(), &c, 1), 1);

  SpinUntilReadable(a.get(), std::chrono::microseconds(0));  // off: returns at once
  b.Reset();
  SpinUntilReadable(a.get(), std::chrono::seconds(60));  // the peer closed: returns
  EXPECT_TRUE(readable());
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return TransportKindName(info.param.kind) + (info.param.secured ? "_secured" : "") +
         (info.param.tls ? "_tls" : "") + (info.param.busy_poll ? "_busy_poll" : "");
}

INSTANTIATE_TEST_SUITE_P(
    AllTransports, TransportTest,
    ::testing::Values(Param{TransportKind::kGrpc, false}, Param{TransportKind::kTcp, false},
                      Param{TransportKind::kShm, false}, Param{TransportKind::kGrpc, true},
                      Param{TransportKind::kTcp, true}, Param{TransportKind::kShm, true},
                      Param{TransportKind::kTcp, false, true}, Param{TransportKind::kTcp, true, true},
                      Param{TransportKind::kGrpc, true, true}, Param{TransportKind::kTcp, true, false, true},
                      Param{TransportKind::kShm, true, false, true},
                      Param{TransportKind::kTcp, true, true, true}),
    ParamName);
INSTANTIATE_TEST_SUITE_P(SecuredTransports, TransportAuthTest,
                         ::testing::Values(Param{TransportKind::kGrpc, true},
                                           Param{TransportKind::kTcp, true}, Param{TransportKind::kShm, true},
                                           Param{TransportKind::kTcp, true, true}),
                         ParamName);
INSTANTIATE_TEST_SUITE_P(TlsTransports, TransportTlsTest,
                         ::testing::Values(Param{TransportKind::kTcp, true, true},
                                           Param{TransportKind::kGrpc, true, true}),
                         ParamName);

}  // namespace
}  // namespace tessera
