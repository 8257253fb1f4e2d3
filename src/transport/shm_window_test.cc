// The trainer's window (shm_window.h): its memory and renewal on their own, the window
// descriptor's checks, and a real shared-memory server and client in one process: pushes read and
// pulls answered in place only while the window is held and the buffers lie in one run of it, a
// failed call that renews the window so a late pserver write lands nowhere the trainer reads, and
// a call whose window was renewed under it failing instead of reporting values it never got, and
// work beside a call that reads the reply as the pserver writes it (the progress word).
#include "transport/shm_window.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/reply_progress.h"
#include "common/while_waiting.h"
#include "transport/stream_io.h"
#include "transport/transport_factory.h"

namespace tessera {
namespace {

TEST(ShmWindowTest, AllocatesOnceZeroedAndFindsRunsInside) {
  ShmWindow w;
  EXPECT_EQ(w.generation(), 0u);
  auto m = w.Allocate(10000);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(w.shared());
  EXPECT_EQ(w.size(), 16384u);  // whole pages, with the progress words' 65 cache lines after the 10000
  // Each progress word in a cache line of its own, after the caller's bytes.
  const char* words = reinterpret_cast<const char*>(w.progress_slot(ShmWindow::kProgressSlots - 1));
  EXPECT_GE(words, *m + 10000);
  EXPECT_EQ(reinterpret_cast<const char*>(w.progress_slot(0)) + ShmWindow::kProgressBytes,
            reinterpret_cast<const char*>(w.progress_word()));
  EXPECT_EQ(w.progress_slot(ShmWindow::kProgressSlots), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*m) % 4096, 0u);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ((*m)[i], 0) << i;
  EXPECT_EQ(w.Allocate(10).status().code(), StatusCode::kFailedPrecondition);
  ShmWindow huge;
  auto refused = huge.Allocate(kMaxWindowBytes + 1);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("a pserver maps"), std::string::npos) << refused.status();
  EXPECT_EQ(huge.size(), 0u);
  EXPECT_EQ(w.generation(), 1u);

  char* b = *m;
  EXPECT_EQ(w.OffsetOf(b + 100, 50), 100);
  EXPECT_EQ(w.OffsetOf(b, w.size()), 0);
  EXPECT_EQ(w.OffsetOf(b + 1, w.size()), -1);
  EXPECT_EQ(w.OffsetOf(b - 1, 1), -1);
  char outside[8];
  EXPECT_EQ(w.OffsetOf(outside, 8), -1);

  const ConstBuffer back_to_back[] = {{b + 64, 32}, {b + 96, 0}, {b + 96, 16}};
  EXPECT_EQ(WindowRunOf(w, back_to_back), 64);
  const ConstBuffer gap[] = {{b + 64, 32}, {b + 100, 16}};
  EXPECT_EQ(WindowRunOf(w, gap), -1);
  const ConstBuffer out_of_it[] = {{outside, 8}};
  EXPECT_EQ(WindowRunOf(w, out_of_it), -1);
  const MutableBuffer empty[] = {{b, 0}};
  EXPECT_EQ(WindowRunOf(w, empty), -1);
  const MutableBuffer past_end[] = {{b + w.size() - 8, 8}, {b + w.size(), 8}};
  EXPECT_EQ(WindowRunOf(w, past_end), -1);
}

// What a pserver mapped before a renewal is not what the trainer reads after it: the contents and
// the addresses stay, writes through the old memory no longer show.
TEST(ShmWindowTest, RenewalKeepsContentsAndAddressesAndCutsOffTheOldMemory) {
  ShmWindow w;
  auto m = w.Allocate(8192);
  ASSERT_TRUE(m.ok());
  char* b = *m;
  std::memset(b, 'v', 8192);
  uint64_t g = 0;
  UniqueFd old = w.DuplicateFd(&g);
  ASSERT_TRUE(old.valid());
  EXPECT_EQ(g, 1u);
  void* peer = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, old.get(), 0);
  ASSERT_NE(peer, MAP_FAILED);
  static_cast<char*>(peer)[5] = 'p';  // before the renewal: the trainer sees it
  EXPECT_EQ(b[5], 'p');

  const uint64_t renewals = WindowCountersNow().renewals;
  EXPECT_TRUE(w.Still(1));
  ASSERT_TRUE(w.Renew(1).ok());
  EXPECT_FALSE(w.Still(1));
  EXPECT_TRUE(w.Still(2));
  EXPECT_EQ(WindowCountersNow().renewals, renewals + 1);
  ASSERT_TRUE(w.Renew(1).ok());  // a stale generation: renewed already, nothing happens
  EXPECT_EQ(w.generation(), 2u);
  EXPECT_EQ(WindowCountersNow().renewals, renewals + 1);

  EXPECT_EQ(b[5], 'p');
  EXPECT_EQ(b[6], 'v');
  EXPECT_EQ(b[8191], 'v');
  std::memset(peer, 'x', 8192);  // a late write through the old memory
  EXPECT_EQ(b[5], 'p');
  EXPECT_EQ(b[0], 'v');
  b[7] = 't';  // the trainer's own writes land in the new memory
  EXPECT_EQ(static_cast<char*>(peer)[7], 'x');
  UniqueFd now = w.DuplicateFd(&g);
  EXPECT_EQ(g, 2u);
  char seen = 0;
  ASSERT_EQ(::pread(now.get(), &seen, 1, 7), 1);
  EXPECT_EQ(seen, 't');
  ::munmap(peer, 8192);
}

// A renewal copies what was written, and leaves what never was (a multi-pserver client's staging
// runs, untouched unless it works ahead) as holes: before, copying the whole window filled the new
// memory with zeros, a renewal of a large model's window taking twice and more its memory.
TEST(ShmWindowTest, RenewalCopiesWhatWasWrittenAndLeavesTheRestUnallocated) {
  constexpr size_t kBytes = size_t{64} << 20;
  ShmWindow w;
  auto m = w.Allocate(kBytes);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(w.shared());
  char* b = *m;
  std::memset(b, 'a', 4096);                   // the first page
  std::memset(b + kBytes / 2, 'z', 2 * 4096);  // and two in the middle
  ASSERT_TRUE(w.Renew(1).ok());
  EXPECT_EQ(b[0], 'a');
  EXPECT_EQ(b[4095], 'a');
  EXPECT_EQ(b[4096], 0);
  EXPECT_EQ(b[kBytes / 2 + 8191], 'z');
  uint64_t g = 0;
  UniqueFd now = w.DuplicateFd(&g);
  ASSERT_TRUE(now.valid());
  struct stat st {};
  ASSERT_EQ(::fstat(now.get(), &st), 0);
  EXPECT_LT(static_cast<size_t>(st.st_blocks) * 512, size_t{1} << 20)
      << "the renewed window holds " << st.st_blocks * 512 << " bytes of " << kBytes;
}

TEST(ShmWindowTest, TheSummarySaysWhatWentInPlace) {
  EXPECT_EQ(WindowSummary({}), "");
  EXPECT_EQ(WindowSummary({1876, 1875, 1}), "in place: 1876 requests, 1875 replies (1 renewal)");
  EXPECT_EQ(WindowSummary({2, 2, 0}), "in place: 2 requests, 2 replies (0 renewals)");
}

TEST(WindowDescriptorTest, RoundTripsAndRefusesRangesOutsideTheWindow) {
  uint8_t buf[kWindowDescriptorBytes];
  EncodeWindowDescriptor({4096, 8192, 100}, buf);
  auto d = DecodeWindowDescriptor(buf, 4096, 16384);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->payload_offset, 4096u);
  EXPECT_EQ(d->reply_offset, 8192u);
  EXPECT_EQ(d->reply_room, 100u);

  auto refused = [&](WindowDescriptor w, uint64_t payload, uint64_t window, const char* says) {
    EncodeWindowDescriptor(w, buf);
    auto r = DecodeWindowDescriptor(buf, payload, window);
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  refused({4096, 0, 0}, 4097, 8192, "payload (4097 bytes at offset 4096) lies outside the 8192-byte window");
  refused({UINT64_MAX, 0, 0}, 2, 8192, "payload");
  refused({0, 8000, 193}, 0, 8192, "reply room (193 bytes at offset 8000)");
  refused({0, 1, UINT64_MAX}, 0, 8192, "reply room");
  // A reply room sharing a byte with the payload, either way round (the apply would write the
  // reply while it reads the gradient).
  refused({4096, 4096 + 99, 1}, 100, 8192,
          "reply room (1 bytes at offset 4195) overlaps its payload (100 bytes at offset 4096)");
  refused({4096, 4000, 97}, 100, 8192, "overlaps its payload");
  refused({4096, 0, 8192}, 100, 8192, "overlaps its payload");
  for (WindowDescriptor w : {WindowDescriptor{4096, 4196, 100}, WindowDescriptor{4096, 3996, 100},
                             WindowDescriptor{4096, 4096, 0}}) {
    EncodeWindowDescriptor(w, buf);
    EXPECT_TRUE(DecodeWindowDescriptor(buf, 100, 8192).ok()) << w.reply_offset << " " << w.reply_room;
  }
  EncodeWindowDescriptor({4096, 4096, 100}, buf);
  EXPECT_TRUE(DecodeWindowDescriptor(buf, 0, 8192).ok()) << "no payload: nothing to overlap";
}

// The progress word (where a pserver says how much of a reply in place is written): an aligned
// word of the window, apart from the payload and the reply room; 0 for none.
TEST(WindowDescriptorTest, AProgressWordIsAnAlignedWordApartFromThePayloadAndTheReply) {
  uint8_t buf[kWindowDescriptorBytes];
  EncodeWindowDescriptor({0, 4096, 100, 8184}, buf);
  auto d = DecodeWindowDescriptor(buf, 4096, 8192);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->progress_offset, 8184u);
  EncodeWindowDescriptor({0, 4096, 100}, buf);
  ASSERT_TRUE(DecodeWindowDescriptor(buf, 4096, 8192).ok());
  EXPECT_EQ(DecodeWindowDescriptor(buf, 4096, 8192)->progress_offset, 0u);
  for (uint64_t at :
       {uint64_t{8188}, uint64_t{8192}, uint64_t{4088}, uint64_t{8}, uint64_t{4192}, uint64_t{1} << 48}) {
    // Misaligned; past the end; two inside the payload [0, 4096); inside the reply [4096, 4196);
    // far outside.
    EncodeWindowDescriptor({0, 4096, 100, at}, buf);
    auto r = DecodeWindowDescriptor(buf, 4096, 8192);
    ASSERT_FALSE(r.ok()) << at;
    EXPECT_NE(r.status().message().find("progress word (offset " + std::to_string(at) + ")"),
              std::string::npos)
        << r.status().message();
  }
  EncodeWindowDescriptor({0, 4096, 100, 4200}, buf);
  EXPECT_TRUE(DecodeWindowDescriptor(buf, 4096, 8192).ok()) << "just past the reply room";
}

// Windows are shared memory's alone: a TCP server closes a connection whose frame names one,
// without handling the request.
TEST(WindowDescriptorTest, ATcpFrameNamingAWindowClosesItsConnection) {
  class Counting : public RequestHandler {
   public:
    void Handle(std::string_view, ConstBuffer, std::unique_ptr<Responder> r) override {
      ++handled;
      r->Send("re", {});
    }
    std::atomic<int> handled{0};
  } handler;
  auto server = NewServerTransport(TransportKind::kTcp, {});
  ASSERT_TRUE(server->Start("127.0.0.1", 0, &handler).ok());
  for (uint8_t flag : {kFrameFlagInWindow, static_cast<uint8_t>(kFrameFlagNewWindow | kFrameFlagInWindow)}) {
    auto c = ConnectTcp(server->endpoint(), Deadline(std::chrono::seconds(5)));
    ASSERT_TRUE(c.ok()) << c.status();
    StreamReader reader;
    reader.Reset(c->get());
    uint8_t greeting[kGreetingBytes];
    Deadline d(std::chrono::seconds(5));
    ASSERT_TRUE(reader.Read(greeting, sizeof greeting, &d).ok());
    uint8_t pre[kFramePreambleBytes];
    EncodePreamble({FrameKind::kRequest, flag, 1, 1, 0}, pre);
    std::string bytes(reinterpret_cast<const char*>(pre), sizeof pre);
    bytes += "x";
    iovec iov{bytes.data(), bytes.size()};
    ASSERT_TRUE(WriteFully(c->get(), &iov, 1, &d).ok());
    uint8_t reply[kFramePreambleBytes];
    Deadline r(std::chrono::seconds(10));
    EXPECT_FALSE(reader.Read(reply, sizeof reply, &r).ok()) << "flags " << int(flag) << " were answered";
  }
  EXPECT_EQ(handler.handled.load(), 0);
  server->Shutdown();
}

// A pserver stand-in. "echo": the payload xor 0x5a, into memory the responder lends. "pull N":
// N bytes (i % 251). "hold N": lends N bytes and keeps the responder for the test to answer.
class WindowHandler : public RequestHandler {
 public:
  void Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> r) override {
    std::string h(header);
    if (h.rfind("progress ", 0) == 0) return Progress(std::stoul(h.substr(9)), std::move(r));
    if (h.rfind("hold ", 0) == 0) {
      MutableBuffer out = r->Allocate(std::stoul(h.substr(5)));
      std::lock_guard<std::mutex> lock(mu_);
      held_.push_back({std::move(r), out});
      return;
    }
    const size_t n = h.rfind("pull ", 0) == 0 ? std::stoul(h.substr(5)) : payload.size;
    MutableBuffer out = r->Allocate(n);
    char* o = static_cast<char*>(out.data);
    const char* in = static_cast<const char*>(payload.data);
    for (size_t i = 0; i < n; ++i)
      o[i] = h == "echo" ? static_cast<char>(in[i] ^ 0x5a) : static_cast<char>(i % 251);
    ConstBuffer b{out.data, n};
    r->Send("re:" + h, n ? std::span<const ConstBuffer>(&b, 1) : std::span<const ConstBuffer>{});
  }
  // "progress N": N bytes (i % 251); with a progress word, the first half told, then (once the
  // test has seen it, at most 10 s) the rest.
  void Progress(size_t n, std::unique_ptr<Responder> r) {
    MutableBuffer out = r->Allocate(n);
    const ReplyProgress progress{static_cast<char*>(out.data), n, out.progress};
    had_progress = progress.word != nullptr;
    char* o = static_cast<char*>(out.data);
    for (size_t i = 0; i < n; ++i) {
      o[i] = static_cast<char>(i % 251);
      if (i + 1 != n / 2 || !progress.word) continue;
      progress.WrittenUpTo(o + n / 2);
      for (int k = 0; k < 2000 && !seen_half.load(); ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (progress.word) progress.WrittenUpTo(o + n);
    ConstBuffer b{out.data, n};
    r->Send("re:progress", {&b, 1});
  }
  std::atomic<bool> had_progress{false}, seen_half{false};

  struct Held {
    std::unique_ptr<Responder> responder;
    MutableBuffer memory;
  };
  std::vector<Held> TakeHeld() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(held_);
  }
  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }
  // The responders held once one is (at most 20 s).
  size_t WaitForHeld() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (held() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return held();
  }

 private:
  std::mutex mu_;
  std::vector<Held> held_;
};

class ShmWindowCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = NewServerTransport(TransportKind::kShm, {});
    ASSERT_TRUE(server_->Start("127.0.0.1", 0, &handler_).ok());
    auto m = window_->Allocate(1 << 20);
    ASSERT_TRUE(m.ok());
    base_ = *m;
    TransportOptions o;
    o.window = window_;
    conn_ = NewClientConnection(TransportKind::kShm, server_->endpoint(), o);
  }
  void TearDown() override { server_->Shutdown(); }

  // Sends `n` bytes from window offset 0 as "echo", the reply into offset 512 Ki; checks it.
  void EchoThroughTheWindow(size_t n, char fill) {
    std::memset(base_, fill, n);
    ConstBuffer out[] = {{base_, n / 2}, {base_ + n / 2, n - n / 2}};
    MutableBuffer in[] = {{base_ + (512 << 10), n}};
    auto r = conn_->Call("echo", out, in, std::chrono::seconds(20));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->header, "re:echo");
    ASSERT_EQ(r->payload_bytes, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(base_[(512 << 10) + i], static_cast<char>(fill ^ 0x5a)) << i;
  }

  WindowHandler handler_;
  std::unique_ptr<ServerTransport> server_;
  std::shared_ptr<ShmWindow> window_ = std::make_shared<ShmWindow>();
  char* base_ = nullptr;
  std::unique_ptr<ClientConnection> conn_;
};

TEST_F(ShmWindowCallTest, HeldWindowCallsAreReadAndAnsweredInPlaceAfterTheFirst) {
  ShmWindow::Hold hold(window_.get());
  const WindowCounters before = WindowCountersNow();
  // The first call of a connection brings its region, so it is copied; the window goes with the
  // second, and every call after it is in place.
  for (int i = 0; i < 4; ++i) EchoThroughTheWindow(100000, static_cast<char>('a' + i));
  const WindowCounters after = WindowCountersNow();
  EXPECT_EQ(after.requests_in_place - before.requests_in_place, 3u);
  EXPECT_EQ(after.replies_in_place - before.replies_in_place, 3u);
  EXPECT_EQ(after.renewals, before.renewals);

  // A pull (no payload) lands in place too, and a reply smaller than its room fills its start.
  MutableBuffer in[] = {{base_ + 4096, 300}};
  std::memset(base_ + 4096, 0, 300);
  auto r = conn_->Call("pull 200", {}, in, std::chrono::seconds(20));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->payload_bytes, 200u);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(base_[4096 + i], static_cast<char>(i)) << i;
  EXPECT_EQ(base_[4096 + 200], 0);
  EXPECT_EQ(WindowCountersNow().replies_in_place - after.replies_in_place, 1u);
}

TEST_F(ShmWindowCallTest, CallsAreCopiedWhenTheWindowIsNotHeldOrTheBuffersAreNotOneRunOfIt) {
  const WindowCounters before = WindowCountersNow();
  for (int i = 0; i < 3; ++i) EchoThroughTheWindow(5000, 'n');  // not held
  {
    ShmWindow::Hold hold(window_.get());
    EchoThroughTheWindow(5000, 'h');  // the window goes with this one
    const WindowCounters mid = WindowCountersNow();
    EXPECT_EQ(mid.requests_in_place - before.requests_in_place, 1u);
    // A gap between the payload's buffers, then a reply buffer outside the window: copied, and right.
    std::memset(base_, 'g', 200);
    ConstBuffer gap[] = {{base_, 100}, {base_ + 101, 99}};
    std::vector<char> reply(199);
    MutableBuffer in[] = {{reply.data(), reply.size()}};
    auto r = conn_->Call("echo", gap, in, std::chrono::seconds(20));
    ASSERT_TRUE(r.ok()) << r.status();
    for (char c : reply) ASSERT_EQ(c, static_cast<char>('g' ^ 0x5a));
    ConstBuffer one[] = {{base_, 100}};
    r = conn_->Call("echo", one, in, std::chrono::seconds(20));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(WindowCountersNow().requests_in_place, mid.requests_in_place);
    // A reply buffer over the payload's second half, both in the window: copied (a pserver would
    // refuse the descriptor), and the reply is the payload as it was sent.
    for (int i = 0; i < 200; ++i) base_[i] = static_cast<char>(i);
    ConstBuffer payload[] = {{base_, 200}};
    MutableBuffer over[] = {{base_ + 100, 200}};
    r = conn_->Call("echo", payload, over, std::chrono::seconds(20));
    ASSERT_TRUE(r.ok()) << r.status();
    for (int i = 0; i < 200; ++i) ASSERT_EQ(base_[100 + i], static_cast<char>(i ^ 0x5a)) << i;
    EXPECT_EQ(WindowCountersNow().requests_in_place, mid.requests_in_place);
  }
}

// The pserver keeps a reply past the call's deadline and writes it later: with the window renewed
// at the failure, the late write lands in memory the trainer no longer reads, and what the trainer
// had there stays. Without the renewal the marker would show in the trainer's buffer.
TEST_F(ShmWindowCallTest, AFailedCallRenewsTheWindowSoALateWriteLandsNowhere) {
  ShmWindow::Hold hold(window_.get());
  EchoThroughTheWindow(1000, 'a');
  EchoThroughTheWindow(1000, 'b');  // now the pserver maps the window
  std::memset(base_ + 8192, 'k', 4096);
  MutableBuffer in[] = {{base_ + 8192, 4096}};
  const WindowCounters before = WindowCountersNow();
  auto r = conn_->Call("hold 4096", {}, in, std::chrono::milliseconds(300));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(WindowCountersNow().renewals - before.renewals, 1u);
  EXPECT_EQ(WindowCountersNow().requests_in_place - before.requests_in_place, 1u);
  auto held = handler_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  ASSERT_EQ(held[0].memory.size, 4096u);
  std::memset(held[0].memory.data, 'X', 4096);  // the late write
  ConstBuffer b{held[0].memory.data, 4096};
  held[0].responder->Send("late", {&b, 1});
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(base_[8192 + i], 'k') << i;

  // The connection is made again; the renewed window goes with its second call.
  EchoThroughTheWindow(1000, 'c');
  const WindowCounters mid = WindowCountersNow();
  EchoThroughTheWindow(1000, 'd');
  EXPECT_EQ(WindowCountersNow().replies_in_place - mid.replies_in_place, 1u);
}

// Two connections share a window (two pservers, or a link's two lanes). One's call fails and
// renews the window while the other's pserver is writing its reply there: that reply went into
// the old memory, so the other call fails too instead of returning values the trainer never got.
TEST_F(ShmWindowCallTest, ACallWhoseWindowWasRenewedUnderItFails) {
  ShmWindow::Hold hold(window_.get());
  TransportOptions o;
  o.window = window_;
  auto other = NewClientConnection(TransportKind::kShm, server_->endpoint(), o);
  EchoThroughTheWindow(1000, 'a');
  EchoThroughTheWindow(1000, 'b');
  ConstBuffer out[] = {{base_, 1000}};
  MutableBuffer into[] = {{base_ + 4096, 1000}};
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(other->Call("echo", out, into, std::chrono::seconds(20)).ok());

  std::memset(base_ + 65536, 'k', 100);
  MutableBuffer in[] = {{base_ + 65536, 100}};
  StatusOr<CallResult> waiting = Status::Unknown("not run");
  std::thread t([&] { waiting = other->Call("hold 100", {}, in, std::chrono::seconds(30)); });
  ASSERT_EQ(handler_.WaitForHeld(), 1u);
  auto held = handler_.TakeHeld();
  // This connection's call fails (its deadline passes with the pserver holding the reply).
  MutableBuffer mine[] = {{base_ + 131072, 100}};
  auto failed = conn_->Call("hold 100", {}, mine, std::chrono::milliseconds(200));
  ASSERT_FALSE(failed.ok());
  std::memset(held[0].memory.data, 'X', 100);
  ConstBuffer b{held[0].memory.data, 100};
  held[0].responder->Send("re:hold", {&b, 1});
  t.join();
  ASSERT_FALSE(waiting.ok());
  EXPECT_EQ(waiting.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(waiting.status().message().find("renewed"), std::string::npos) << waiting.status();
  EXPECT_EQ(base_[65536], 'k');
  for (auto& h : handler_.TakeHeld()) h.responder.reset();
}

// A reply's progress word comes with its buffer, not with the thread that took it: a held reply
// (a trainer waiting at a barrier) written by another thread (the pserver's thread of the trainer
// that completes the barrier) tells its own trainer how far it has got.
TEST_F(ShmWindowCallTest, AHeldReplyWrittenByAnotherThreadTellsItsProgress) {
  ShmWindow::Hold hold(window_.get());
  EchoThroughTheWindow(1000, 'a');
  EchoThroughTheWindow(1000, 'b');
  const size_t n = 100000;
  char* room = base_ + (256 << 10);
  std::memset(room, 0, n);
  std::atomic<bool> seen_half{false};
  bool first_half = false, whole = false;
  StatusOr<CallResult> waiting = Status::Unknown("not run");
  std::thread caller([&] {
    WhileWaiting work(
        [&](const WaitingCall& call) {
          first_half = call.ReplyWrittenUpTo(room + n / 2);
          for (size_t i = 0; i < n / 2; ++i) first_half = first_half && room[i] == static_cast<char>(i % 251);
          EXPECT_EQ(room[n - 1], 0) << "the second half was written before the first was seen";
          seen_half = true;
          whole = call.ReplyWrittenUpTo(room + n);
        },
        /*wants_progress=*/true);
    MutableBuffer in[] = {{room, n}};
    waiting = conn_->Call("hold 100000", {}, in, std::chrono::seconds(30));
  });
  ASSERT_EQ(handler_.WaitForHeld(), 1u);
  auto held = handler_.TakeHeld();
  MutableBuffer out = held[0].memory;
  ASSERT_NE(out.progress, nullptr) << "the held reply's buffer has no progress word";
  const ReplyProgress progress{static_cast<char*>(out.data), out.size, out.progress};
  char* o = static_cast<char*>(out.data);
  for (size_t i = 0; i < n / 2; ++i) o[i] = static_cast<char>(i % 251);
  progress.WrittenUpTo(o + n / 2);
  for (int k = 0; k < 2000 && !seen_half.load(); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(seen_half.load());
  for (size_t i = n / 2; i < n; ++i) o[i] = static_cast<char>(i % 251);
  progress.WrittenUpTo(o + n);
  ConstBuffer b{out.data, n};
  held[0].responder->Send("re:hold", {&b, 1});
  caller.join();
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_TRUE(first_half);
  EXPECT_TRUE(whole);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(room[i], static_cast<char>(i % 251)) << i;
}

// Work beside a call in place (WhileWaiting) gets a progress word: it sees the first half of the
// reply while the pserver still holds the rest, then the whole. A call without such work names no
// word, and a reply written without telling ends the work's wait when it comes, short.
TEST_F(ShmWindowCallTest, WorkBesideACallSeesTheReplyInPlaceAsItIsWritten) {
  ShmWindow::Hold hold(window_.get());
  EchoThroughTheWindow(1000, 'a');
  EchoThroughTheWindow(1000, 'b');
  const size_t n = 100000;
  char* room = base_ + (256 << 10);
  MutableBuffer in[] = {{room, n}};
  std::memset(room, 0, n);
  bool had_word = false, first_half = false, whole = false, beyond = true;
  {
    WhileWaiting work(
        [&](const WaitingCall& call) {
          had_word = call.progress != nullptr;
          first_half = call.ReplyWrittenUpTo(room + n / 2);
          for (size_t i = 0; i < n / 2; ++i) first_half = first_half && room[i] == static_cast<char>(i % 251);
          EXPECT_EQ(room[n - 1], 0) << "the second half was written before the first was seen";
          handler_.seen_half = true;
          whole = call.ReplyWrittenUpTo(room + n);
          beyond = call.ReplyWrittenUpTo(room + n + 1);
        },
        /*wants_progress=*/true);
    auto r = conn_->Call("progress 100000", {}, in, std::chrono::seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(work.ran());
  }
  EXPECT_TRUE(had_word);
  EXPECT_TRUE(handler_.had_progress.load());
  EXPECT_TRUE(first_half);
  EXPECT_TRUE(whole);
  EXPECT_FALSE(beyond) << "past the reply room";
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(room[i], static_cast<char>(i % 251)) << i;

  handler_.seen_half = false;
  MutableBuffer small[] = {{room, 1000}};
  ASSERT_TRUE(conn_->Call("progress 1000", {}, small, std::chrono::seconds(30)).ok());
  EXPECT_FALSE(handler_.had_progress.load()) << "no work beside the call, no progress word";
  {
    WhileWaiting work([&](const WaitingCall& call) { had_word = call.progress != nullptr; });
    ASSERT_TRUE(conn_->Call("progress 1000", {}, small, std::chrono::seconds(30)).ok());
  }
  EXPECT_FALSE(had_word) << "work that does not want one";
  EXPECT_FALSE(handler_.had_progress.load());

  bool got = true;
  const auto start = std::chrono::steady_clock::now();
  {
    WhileWaiting work([&](const WaitingCall& call) { got = call.ReplyWrittenUpTo(room + 200); }, true);
    ASSERT_TRUE(conn_->Call("pull 200", {}, small, std::chrono::seconds(30)).ok());
  }
  EXPECT_FALSE(got);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace tessera
