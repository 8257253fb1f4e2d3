// ExportCuts: the consistent copies ("cuts") of one shard that exporters asked for, when each is
// taken and when it is dropped. Pure: no locks, no clocks (the caller passes the time), no I/O;
// the copy itself (`Cut`) is made by the caller when told to.
//
// An exporter asks every pserver for cut `id` at one version T (sync: every shard passes the
// same versions, so copies at T on all of them are one model). A shard at T copies now; one
// below T copies when it reaches T; one past T cannot, and says so (the exporter picks a later
// T). Cuts are bounded in number (the least recently used is dropped for a new one) and in time
// (one not asked for or read for `idle_ms` is dropped), so an exporter that died costs memory
// only for a while.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace tessera {

template <class Cut>
class ExportCuts {
 public:
  struct Limits {
    size_t max_cuts = 2;
    int64_t idle_ms = 60'000;
  };
  enum class State { kUnknown, kPending, kPassed, kReady };
  // What Ask says to do.
  enum class Action {
    kTake,    // copy the shard now and Put it
    kWait,    // pending: the shard is below the version
    kPassed,  // the shard is past the version: this cut cannot be taken
    kReady,   // already taken
  };

  explicit ExportCuts(Limits limits = {}) : limits_(limits) {}

  // Cut `id` at `target` (-1: the current version), with the shard at `version`. Asking again
  // for a known id reports its state (a different target is ignored: the first one holds).
  Action Ask(uint64_t id, int64_t target, int64_t version, int64_t now_ms) {
    Expire(now_ms);
    auto it = cuts_.find(id);
    if (it == cuts_.end()) {
      if (target < 0) target = version;
      while (cuts_.size() >= limits_.max_cuts && !cuts_.empty()) DropLeastRecent();
      Entry e;
      e.target = target;
      e.used_ms = now_ms;
      e.state = target < version ? State::kPassed : State::kPending;
      it = cuts_.emplace(id, std::move(e)).first;
    }
    Entry& e = it->second;
    e.used_ms = now_ms;
    switch (e.state) {
      case State::kReady:
        return Action::kReady;
      case State::kPassed:
        return Action::kPassed;
      default:
        // A pending cut whose version came without a copy (a version set by a restore, say).
        if (e.target < version) {
          e.state = State::kPassed;
          return Action::kPassed;
        }
        return e.target == version ? Action::kTake : Action::kWait;
    }
  }

  // The shard's version is now `version`: the pending cuts to take now (Put each), in id order.
  // Pending cuts whose version went by become passed.
  std::vector<uint64_t> VersionReached(int64_t version) {
    std::vector<uint64_t> take;
    for (auto& [id, e] : cuts_) {
      if (e.state != State::kPending) continue;
      if (e.target == version) take.push_back(id);
      if (e.target < version) e.state = State::kPassed;
    }
    return take;
  }

  // Whether a cut is pending now (cheap; for the hot path to skip VersionReached).
  bool any_pending() const {
    for (const auto& [id, e] : cuts_)
      if (e.state == State::kPending) return true;
    return false;
  }

  // The copy for pending cut `id` (after kTake or VersionReached). Ignored if it was dropped.
  void Put(uint64_t id, std::shared_ptr<const Cut> cut) {
    auto it = cuts_.find(id);
    if (it == cuts_.end() || it->second.state != State::kPending) return;
    it->second.state = State::kReady;
    it->second.cut = std::move(cut);
  }

  // A taken cut, for reading (null if unknown, not taken, released or expired).
  std::shared_ptr<const Cut> Get(uint64_t id, int64_t now_ms) {
    Expire(now_ms);
    auto it = cuts_.find(id);
    if (it == cuts_.end() || it->second.state != State::kReady) return nullptr;
    it->second.used_ms = now_ms;
    return it->second.cut;
  }

  State state(uint64_t id) const {
    auto it = cuts_.find(id);
    return it == cuts_.end() ? State::kUnknown : it->second.state;
  }

  // Drops cut `id`; false if it was not known.
  bool Release(uint64_t id) { return cuts_.erase(id) > 0; }

  // Drops the cuts idle for limits.idle_ms; returns how many.
  size_t Expire(int64_t now_ms) {
    size_t n = 0;
    for (auto it = cuts_.begin(); it != cuts_.end();) {
      if (now_ms - it->second.used_ms >= limits_.idle_ms) {
        it = cuts_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    dropped_ += n;
    return n;
  }

  size_t size() const { return cuts_.size(); }
  // Cuts dropped before their exporter released them (idle, or for a newer one).
  int64_t dropped() const { return dropped_; }

 private:
  struct Entry {
    int64_t target = 0;
    int64_t used_ms = 0;
    State state = State::kPending;
    std::shared_ptr<const Cut> cut;
  };
  void DropLeastRecent() {
    auto oldest = cuts_.begin();
    for (auto it = cuts_.begin(); it != cuts_.end(); ++it)
      if (it->second.used_ms < oldest->second.used_ms) oldest = it;
    cuts_.erase(oldest);
    ++dropped_;
  }

  Limits limits_;
  std::map<uint64_t, Entry> cuts_;
  int64_t dropped_ = 0;
};

}  // namespace tessera
