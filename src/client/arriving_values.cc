// A step's values arriving over several calls in place: see arriving_values.h.
#include "client/arriving_values.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/clock.h"

namespace tessera {
namespace {

// Whether every buffer with bytes lies in the window.
template <class Buffer>
bool AllInWindow(const ShmWindow& w, const std::vector<Buffer>& bufs) {
  return std::all_of(bufs.begin(), bufs.end(),
                     [&](const Buffer& b) { return b.size == 0 || w.OffsetOf(b.data, b.size) >= 0; });
}

// How long a wait on another thread's call sleeps between looks once its word stands still (its
// pserver waits at the barrier for the other trainers).
constexpr std::chrono::microseconds kStillNap{100};

}  // namespace

std::shared_ptr<ArrivingValues> ArrivingValues::Track(std::vector<std::unique_ptr<LinkCall>>& calls,
                                                      const ShmWindow& window, const Staging& staging) {
  if (!window.shared() || calls.size() > static_cast<size_t>(ShmWindow::kProgressSlots)) return nullptr;
  // Where each call's reply and payload lie: one run's offset, or -1 (staged).
  struct Runs {
    int64_t reply = -1, payload = -1;
  };
  std::vector<Runs> runs(calls.size());
  int pulling = 0;
  size_t push_bytes = 0, pull_bytes = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const LinkCall& c = *calls[i];
    if (c.before || c.on_end || !AllInWindow(window, c.payload) || !AllInWindow(window, c.reply))
      return nullptr;
    const size_t reply = TotalSize(c.reply);
    if (reply == 0) continue;
    ++pulling;
    runs[i].reply = WindowRunOf(window, std::span<const MutableBuffer>(c.reply));
    if (runs[i].reply < 0) pull_bytes += reply;
    if (c.payload.empty()) continue;
    runs[i].payload = WindowRunOf(window, std::span<const ConstBuffer>(c.payload));
    if (runs[i].payload < 0) push_bytes += TotalSize(c.payload);
  }
  if (pulling < 2 || push_bytes > staging.bytes || pull_bytes > staging.bytes) return nullptr;

  std::shared_ptr<ArrivingValues> a(new ArrivingValues(calls.size()));
  char* push_at = staging.push;
  char* pull_at = staging.pull;
  for (size_t i = 0; i < calls.size(); ++i) {
    LinkCall& c = *calls[i];
    const size_t reply = TotalSize(c.reply);
    if (reply == 0) continue;
    Call& tracked = a->calls_[i];
    tracked.word = window.progress_slot(static_cast<int>(i));
    // Zero before any call goes out: it holds the step before's count until the link sends this
    // call, and the work may look sooner.
    tracked.word->store(0, std::memory_order_relaxed);
    const bool stage_reply = runs[i].reply < 0;
    const char* room = stage_reply ? pull_at : window.base() + runs[i].reply;
    size_t at = 0;
    for (const MutableBuffer& b : c.reply) {
      if (b.size == 0) continue;
      char* values = static_cast<char*>(b.data);
      const char* from = stage_reply ? pull_at + at : values;
      // In one run, a piece's place in the room is its distance from the run's start.
      const size_t begin = stage_reply ? at : static_cast<size_t>(values - room);
      a->pieces_.push_back({values, from, b.size, begin + b.size, static_cast<int>(i), stage_reply, 0});
      at += b.size;
    }
    if (stage_reply) {
      c.reply = {MutableBuffer{pull_at, reply, tracked.word}};
      pull_at += reply;
    } else {
      c.reply.front().progress = tracked.word;
    }
    if (!c.payload.empty() && runs[i].payload < 0) {
      const size_t bytes = TotalSize(c.payload);
      // Gathered by the link just before the call is first sent, beside the other calls.
      c.before = [gather = std::move(c.payload), to = push_at](LinkCall&) { GatherInto(gather, to); };
      c.payload = {ConstBuffer{push_at, bytes}};
      push_at += bytes;
    }
    a->staged_calls_ += stage_reply;
    c.on_end = [a, i] { a->Ended(static_cast<int>(i)); };
  }
  std::sort(a->pieces_.begin(), a->pieces_.end(),
            [](const Piece& x, const Piece& y) { return x.values < y.values; });
  return a;
}

bool ArrivingValues::Await(const Piece& pc, size_t need, const WaitingCall& here) const {
  const Call& c = calls_[static_cast<size_t>(pc.call)];
  if (c.word == nullptr) return false;
  // The asking thread's own call (whichever of the step's it is, over whichever transport) ends
  // when its reply comes: its socket says so. Waiting for its end otherwise would wait for itself.
  if (c.word == here.progress || c.word == here.caller_word)
    return WaitForProgress(*c.word, need, [&](bool still) { return here.Over(still); });
  // Another thread's: its end is told by Ended; the deadlines of a step's calls run together.
  return WaitForProgress(*c.word, need, [&](bool still) {
    if (c.ended.load(std::memory_order_acquire) || Now() >= here.deadline) return true;
    if (still) std::this_thread::sleep_for(kStillNap);
    return false;
  });
}

bool ArrivingValues::WrittenUpTo(const void* p, const WaitingCall& here) const {
  const char* until = static_cast<const char*>(p);
  for (; next_ < pieces_.size(); ++next_) {
    Piece& pc = pieces_[next_];
    if (pc.values >= until) return true;  // the rest lie after p
    // A piece may be read as far as it has come; a staged one is copied that far first.
    const size_t want = std::min(pc.bytes, static_cast<size_t>(until - pc.values));
    if (!Await(pc, pc.end - pc.bytes + want, here)) return false;
    if (pc.staged && pc.copied < want) {
      std::memcpy(pc.values + pc.copied, pc.from + pc.copied, want - pc.copied);
      pc.copied = want;
      copied_ahead_ += want == pc.bytes;
    }
    if (want < pc.bytes) return true;
  }
  return true;
}

std::pair<const char*, const char*> ArrivingValues::Span() const {
  if (pieces_.empty()) return {nullptr, nullptr};
  return {pieces_.front().values, pieces_.back().values + pieces_.back().bytes};
}

void ArrivingValues::Ended(int call) {
  calls_[static_cast<size_t>(call)].ended.store(true, std::memory_order_release);
}

void ArrivingValues::Finish(bool ok, bool again) {
  if (!ok) return;
  for (Piece& pc : pieces_) {
    if (!pc.staged) continue;
    const size_t from = again ? 0 : pc.copied;
    if (from < pc.bytes) std::memcpy(pc.values + from, pc.from + from, pc.bytes - from);
    pc.copied = pc.bytes;
  }
}

}  // namespace tessera
