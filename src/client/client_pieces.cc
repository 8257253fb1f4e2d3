// Client::PushPiece (include/tessera/client.h): a step's push in pieces. In a sync job each piece
// goes to the pservers that hold its blocks as it comes (numbered per pserver; the last piece goes
// to every pserver), and pulls its blocks back; a pserver that has every trainer's gradient for
// them answers at once, otherwise it defers them (reply.pull_deferred) and the last piece pulls
// every block not yet back. Elsewhere the pieces are copied and pushed whole with the last.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "client/client_impl.h"
#include "client/handle_state.h"

namespace tessera {

bool ClientImpl::PiecesOnWire() const {
  return job_.mode.kind == ConsistencyMode::Kind::kSync && !job_.hosted() && job_.backup_trainers == 0;
}

Handle ClientImpl::PushPiece(const Gradients& grads, bool last, bool pull) {
  if (!initialized_) return Handle(Failed(Status::FailedPrecondition("call Initialize() before pushing")));
  if (member_->lost()) return Handle(Failed(LeaseLost()));
  const int n = job_.pservers;
  if (!piece_.open) {
    if (Status s = Realign(); !s.ok()) return Handle(Failed(s));
    piece_.open = true;
    piece_.step = step_.load();
    piece_.next.assign(n, 0);
    piece_.received.clear();
    for (int p = 0; p < n; ++p)
      piece_.received.push_back(std::make_shared<std::vector<RequestBuilder::BlockRef>>());
    piece_.dropped = false;
  }
  if (!PiecesOnWire()) return GatherPiece(grads, last, pull);
  if (piece_.dropped) {
    // The step's push was dropped at an earlier piece: the rest is not sent.
    Handle h = piece_.dropped_handle;
    if (last) piece_.open = false;
    return h;
  }
  auto calls = NewCalls();
  std::vector<std::vector<RequestBuilder::BlockRef>> blocks;
  if (Status s = builder_->AddPush(grads, &calls, /*ranges=*/true, &blocks); !s.ok())
    return Handle(Failed(s));
  const int64_t step = piece_.step;
  Sending how{.all = last};
  const std::string why = ScanGradient(grads);
  if (!why.empty()) {
    // Nothing more of this step's gradient is sent; its pservers drop what came before.
    how.dropped = DropNonFinite(why, step);
    how.all = true;
    calls = NewCalls();
    builder_->AddSkippedPush(why, &calls);
    blocks.assign(n, {});
    last = true;
    pull = true;
  } else if (last) {
    nonfinite_.Clean();
  }
  for (int p = 0; p < n; ++p) {
    LinkCall& c = *calls[p];
    if (!last && c.req.push_size() == 0) continue;  // nothing for this pserver in this piece
    c.req.set_step(step);
    c.req.set_piece(piece_.next[p]++);
    c.req.set_more_pieces(!last);
    if (!pull) continue;
    c.req.set_need(PullNeed(step + 1));
    auto received = piece_.received[p];
    if (!last) {
      builder_->AddDensePullBlocks(blocks[p], &c);
      c.after_reply = [received, mine = blocks[p]](const wire::DataReply& r) {
        if (!r.pull_deferred()) received->insert(received->end(), mine.begin(), mine.end());
      };
    } else {
      // Every block not back yet, decided when the link sends it (its earlier pieces are done).
      c.before = [this, received, p](LinkCall& call) {
        std::vector<RequestBuilder::BlockRef> want = builder_->DenseBlocksOf(p);
        std::sort(received->begin(), received->end());
        std::erase_if(want, [&](const RequestBuilder::BlockRef& b) {
          return std::binary_search(received->begin(), received->end(), b);
        });
        builder_->AddDensePullBlocks(want, &call);
      };
    }
  }
  // Pservers without a part in this piece are left out of it (all=false drops empty calls).
  Handle h(Dispatch(std::move(calls), std::move(how)));
  if (!why.empty()) {
    piece_.dropped = true;
    piece_.dropped_handle = h;
  }
  if (last) {
    RaiseStep(step + 1);
    if (!piece_.dropped) piece_.open = false;
  }
  return h;
}

Handle ClientImpl::GatherPiece(const Gradients& grads, bool last, bool pull) {
  // Checked as a piece would be (names, ranges), then copied: the caller may reuse its buffers.
  if (Status s = builder_->CheckPush(grads, /*ranges=*/true); !s.ok()) return Handle(Failed(s));
  if (grads.samples > 0) piece_.samples = grads.samples;
  for (const auto& g : grads.dense) {
    auto& whole = piece_.dense[g.name];
    if (whole.empty()) {
      for (const auto& d : builder_->dense()) {
        if (d.name == g.name) whole.assign(d.size, 0.0f);
      }
    }
    std::copy(g.grad.begin(), g.grad.end(), whole.begin() + g.offset);
  }
  for (const auto& t : grads.sparse) {
    auto& [keys, rows] = piece_.sparse[t.table];
    keys.insert(keys.end(), t.keys.begin(), t.keys.end());
    rows.insert(rows.end(), t.grads.begin(), t.grads.end());
  }
  if (!last) {
    auto state = std::make_shared<Handle::State>(1);
    state->Complete(Status::OK(), step_.load(), step_.load());
    return Handle(state);
  }
  // The requests point into the gathered buffers: they live as long as the requests do.
  auto gathered = std::make_shared<PieceStep>(std::move(piece_));
  piece_ = PieceStep{};
  Gradients all;
  for (const auto& [name, g] : gathered->dense) all.Dense(name, g);
  for (const auto& [table, kr] : gathered->sparse) all.Sparse(table, kr.first, kr.second);
  all.samples = gathered->samples;
  return Handle(DoPush(all, pull ? PushMode::kPushPull : PushMode::kPush, gathered));
}

}  // namespace tessera
