// PserverService: sync pushes in pieces (see step_pieces.h and docs/protocol.md, "Pushes in
// pieces"). A trainer sends its push as its gradients become ready; a dense block every
// contributor of the open step has sent is applied at once (their gradients summed in trainer-id
// order with the step's scale, as the barrier would), and a piece that pulls only such blocks is
// answered then, so the trainer's next forward pass starts while the rest of the step arrives.
// While some blocks are ahead of the version ("mixed"), anything that must see one version
// (another pull of those blocks, a checkpoint, an export cut) waits for the barrier.
// Not with replicas or elastic shards (their records and handovers are per step): there the
// pieces are held and applied at the barrier.
// In an async job a push may come in pieces too (the parts of a large push, two at a time on a
// trainer's link): each is applied as it arrives, and the push counts once all have.
#include <spdlog/spdlog.h>

#include "pserver/pserver_service.h"

namespace tessera {

StatusOr<Consistency::PushVerdict> PserverService::ArrivePiece(const wire::DataRequest& req,
                                                               const SegmentList& list,
                                                               std::optional<StepPieces::Arrival>* arrival) {
  if (options_.job.mode.kind == ConsistencyMode::Kind::kAsync && !replicated()) {
    // Async: each piece is applied as it arrives (a large push's parts, two at a time).
    return consistency_->AsyncPiece(req.trainer(), req.trainer_epoch(), req.step(), req.piece(),
                                    !req.more_pieces());
  }
  if (replicated() || options_.job.backup_trainers > 0) {
    // Replicas and elastic shards count a push per step (its record, its handover), and backup
    // trainers decide who contributes when a step closes: whole pushes only.
    return Status::InvalidArgument(
        "a push in pieces is not taken by a job with " +
        std::string(replicated() ? "replicated or elastic shards" : "backup trainers") +
        "; send the step's push whole");
  }
  TESSERA_ASSIGN_OR_RETURN(auto verdict,
                           consistency_->CheckPiece(req.trainer(), req.trainer_epoch(), req.step()));
  if (verdict != Consistency::PushVerdict::kHold) return verdict;
  std::vector<StepPieces::Block> blocks;
  for (const auto& part : list.parts()) {
    if (part.dense) blocks.push_back({list.segment(part).param(), list.segment(part).block()});
  }
  TESSERA_ASSIGN_OR_RETURN(
      auto a, pieces_.Arrive(req.trainer(), req.piece(), !req.more_pieces(), req.samples(), blocks));
  if (a == StepPieces::Arrival::kDuplicate) return Consistency::PushVerdict::kDuplicate;
  consistency_->PieceArrived();
  *arrival = a;
  return verdict;
}

void PserverService::ApplyReadyBlocks(std::vector<Reply>* out) {
  if (replicated() || pieces_.empty() || !consistency_->EarlyApplyAllowed()) return;
  const std::vector<std::string> contributors = consistency_->StepContributors();
  auto ready = pieces_.TakeReady(contributors);
  if (ready.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  int64_t total = 0;
  for (const auto& c : contributors) total += pieces_.samples(c);
  // The senders' gradients summed in trainer-id order, as the barrier sums them (StepSums).
  sums_.Begin();
  for (const auto& r : ready) {
    if (total <= 0) break;
    for (const auto& [trainer, piece] : r.senders) {
      const HeldPushes::Piece& h = held_.of(trainer).pieces[piece];
      for (const auto& part : h.list.parts()) {
        const wire::Segment& seg = h.list.segment(part);
        if (part.dense && seg.block() == r.block.block && seg.param() == r.block.param) {
          sums_.AddDense(&seg.param(), seg.block(), seg.count(), h.data() + part.offset);
          break;
        }
      }
    }
  }
  dense_updates_.clear();
  for (const StepSums::Block& sum : sums_.SumDense())
    dense_updates_.push_back({sum.param, sum.block, sum.grad});
  if (!dense_updates_.empty()) {
    store_.ApplyDenseMany(dense_updates_, 1.0f / static_cast<float>(total));
    ObserveApply(start);
  }
  // Pieces whose every block is applied and that hold no sparse rows are not needed again.
  held_.MarkSpent([&](const std::string& param, int64_t block) REQUIRES(mu_) {
    return pieces_.applied({param, block});
  });
  // The pieces' pulls that waited only for these blocks.
  pulls_.ReleaseIf(
      [&](const PullQueue::Pending& w)
          REQUIRES(mu_) { return w.piece && PieceAnswerable(w.request, w.pull); },
      [&](uint64_t ticket, PullQueue::Pending& w) REQUIRES(mu_) {
        consistency_->CancelPull(ticket);
        out->push_back(BuildPullReply(w.request, w.pull, std::move(w.responder), w.prepared.get()));
        out->back().header.set_version(w.request.need());
      });
}

bool PserverService::PieceAnswerable(const wire::DataRequest& req, const SegmentList& pull) const {
  // The last piece waits for the barrier: its answer tells the trainer the step is closed here,
  // and only then may it send pieces of the next step.
  if (!req.more_pieces() || !mixed() || pull.parts().empty() || req.need() != consistency_->version() + 1)
    return false;
  for (const auto& part : pull.parts()) {
    if (!part.dense || !pieces_.applied({pull.segment(part).param(), pull.segment(part).block()}))
      return false;
  }
  return true;
}

bool PserverService::PullsAnEarlyBlock(const SegmentList& pull) const {
  for (const auto& part : pull.parts()) {
    if (part.dense && pieces_.applied({pull.segment(part).param(), pull.segment(part).block()})) return true;
  }
  return false;
}

void PserverService::ClearPieces() {
  held_.Clear();
  pieces_.Clear();
}

}  // namespace tessera
