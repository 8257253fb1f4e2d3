// PullQueue: the pulls a pserver answers later (a sync pull waiting for its step's barrier, an
// SSP pull waiting for the staleness bound, a piece's pull waiting for its blocks), by the ticket
// the consistency machine knows them by; and the replies the next apply writes into. A reply
// "prepared" before an apply has its payload allocated from its responder, and the apply writes
// the new values of the blocks it updates straight there (ShardStore::DenseUpdate::copy_to), on
// the apply's threads; the reply then copies only what that apply did not write.
// Pure: no locks, threads or I/O (the service's lock guards it, as a pull's release must match
// the consistency state); a waiting pull's list points into its own request, which stays put.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "pserver/segment_list.h"
#include "pserver/shard_store.h"
#include "tessera/data.pb.h"
#include "transport/transport.h"

namespace tessera {

class PullQueue {
 public:
  // A pull's reply made before the apply that changes what it pulls.
  struct Prepared {
    MutableBuffer payload;  // the responder's (Allocate)
    // Per part of the pull: the store's dense generation whose values an apply wrote there (0:
    // none).
    std::vector<uint64_t> written;
  };
  struct Pending {
    bool piece = false;  // a piece's pull: may be answered once its blocks are applied
    wire::DataRequest request;
    SegmentList pull;  // over request.pull()
    std::unique_ptr<Responder> responder;
    std::chrono::steady_clock::time_point since;
    std::unique_ptr<Prepared> prepared;  // its payload, when made before an apply
  };

  // ---- Waiting pulls ----
  uint64_t NextTicket() { return next_ticket_++; }
  // Keeps the pull of `request` (copied; `pull` is read from it) until its ticket is released.
  void Park(uint64_t ticket, bool piece, const wire::DataRequest& request, SegmentList pull,
            std::unique_ptr<Responder> responder, std::unique_ptr<Prepared> prepared,
            std::chrono::steady_clock::time_point since);
  // Calls answer(pending) for the pull of `ticket`, if it waits, and forgets it.
  template <class Answer>
  void Release(uint64_t ticket, Answer answer) {
    auto it = waiting_.find(ticket);
    if (it == waiting_.end()) return;
    answer(it->second);
    waiting_.erase(it);
  }
  // Calls answer(ticket, pending) for every waiting pull that `ready(pending)` says may go, in
  // ticket order, and forgets them.
  template <class Ready, class Answer>
  void ReleaseIf(Ready ready, Answer answer) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (ready(it->second)) {
        answer(it->first, it->second);
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Every waiting pull (when serving stops); the queue is then empty.
  std::map<uint64_t, Pending> TakeAll() { return std::exchange(waiting_, {}); }
  size_t size() const { return waiting_.size(); }

  // ---- Replies the next apply writes into ----
  // The reply's payload for `pull`, allocated now from `r` (null: the pull has no dense block).
  static std::unique_ptr<Prepared> Prepare(const SegmentList& pull, Responder& r);
  // The next apply writes into `prepared` (the reply of `pull`; both stay put until then).
  void WriteByNextApply(Prepared* prepared, const SegmentList* pull) { next_.push_back({prepared, pull}); }
  // ... and into the replies of the waiting pulls `tickets` that `writable(pending)` says take the
  // apply's float32 values as they are (prepared now where they were not).
  void WriteByNextApply(std::span<const uint64_t> tickets,
                        const std::function<bool(const Pending&)>& writable);
  // Points `updates` at the replies the next apply writes into (each update's copy_to and
  // copies, and told: the progress of each reply its trainer reads as it comes); the pointers
  // stay valid until MarkWritten.
  void Attach(std::vector<ShardStore::DenseUpdate>& updates);
  // The apply ran: records which parts it wrote (at the store's `generation`) and forgets the
  // replies it was to write.
  void MarkWritten(uint64_t generation);
  // Forgets the replies the next apply was to write into (no apply came).
  void ForgetWrites() { next_.clear(); }

 private:
  std::map<uint64_t, Pending> waiting_;
  uint64_t next_ticket_ = 1;
  // The replies the next apply writes into (with their lists), and Attach's scratch, reused:
  // each list's dense blocks by (parameter, block), the destinations and which part each one is.
  std::vector<std::pair<Prepared*, const SegmentList*>> next_;
  std::vector<absl::flat_hash_map<std::pair<std::string_view, int64_t>, int>> part_of_;
  std::vector<float*> copy_to_;
  std::vector<ReplyProgress> rooms_;        // per reply in next_: its progress (word null: none)
  std::vector<const ReplyProgress*> told_;  // per destination in copy_to_: its reply's, or null
  std::vector<std::pair<Prepared*, int>> copied_parts_;
};

}  // namespace tessera
