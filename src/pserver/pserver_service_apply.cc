// PserverService: applying what the consistency rule lets through, and answering pulls: an
// async/ssp push applied at once, a sync barrier (the contributors' gradients summed in trainer-id
// order, applied once with 1 / total samples), the events drained after each request (barriers,
// due checkpoint copies and export cuts, released pulls), and a pull's reply built from the shard
// (its dense blocks written by the apply itself when the reply was prepared before it).
// Part of pserver_service.h; REQUIRES mu_ held throughout.
#include <absl/container/flat_hash_map.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "common/random.h"
#include "job/wire_codec.h"
#include "pserver/pserver_service.h"

namespace tessera {

void PserverService::ApplyPush(const SegmentList& list, const float* payload, float scale) {
  dense_updates_.clear();
  for (const auto& part : list.parts()) {
    const wire::Segment& seg = list.segment(part);
    if (part.dense) {
      dense_updates_.push_back({&seg.param(), seg.block(), payload + part.offset});
      replicas_.RecordDense(seg.param(), seg.block(), payload + part.offset, part.floats);
    } else {
      store_.ApplySparse(seg.param(), list.keys(part), payload + part.offset, scale);
      replicas_.RecordSparse(seg.param(), list.keys(part), payload + part.offset, part.floats);
    }
  }
  ApplyDenseUpdates(scale);
  replicas_.SetScale(scale);
}

void PserverService::ApplyDenseUpdates(float scale) {
  const bool stamp = options_.job.wire.error_feedback();
  if (stamp) SyncChangeStamps();
  pulls_.Attach(dense_updates_);
  store_.ApplyDenseMany(dense_updates_, scale);
  pulls_.MarkWritten(store_.dense_generation());
  if (!stamp) return;
  // The elements each gradient touched changed (for blocks whose optimizer leaves the others).
  stamps_.BeginApply();
  for (const auto& u : dense_updates_) {
    if (options_.job.wire.For(*u.param).error_feedback() && store_.ZeroGradientKeepsValues(*u.param))
      stamps_.Applied(*u.param, u.block, u.grad, static_cast<size_t>(store_.DenseLength(*u.param, u.block)));
  }
  stamps_generation_ = store_.dense_generation();
}

void PserverService::ApplyBarrier(const Consistency::Barrier& b) {
  const int64_t total = held_.Samples(b.contributors);
  if (total > 0) {
    const float scale = 1.0f / static_cast<float>(total);
    replicas_.SetScale(scale);
    // Every contributor's gradient is summed in trainer-id order, then applied once (StepSums).
    sums_.Begin();
    for (const auto& c : b.contributors) {
      const HeldPushes::Push& p = held_.of(c);
      for (int piece = 0; piece < p.used; ++piece) {
        const HeldPushes::Piece& h = p.pieces[piece];
        if (!h.present) continue;
        const float* payload = h.data();
        for (const auto& part : h.list.parts()) {
          const wire::Segment& seg = h.list.segment(part);
          const float* g = payload + part.offset;
          if (!part.dense) {
            sums_.AddSparse(seg.param(), {seg.keys().data(), static_cast<size_t>(seg.keys_size())}, part.dim,
                            g);
          } else if (!mixed() || !pieces_.applied({seg.param(), seg.block()})) {
            // (A block applied before the barrier, every contributor having sent it, is done.)
            sums_.AddDense(&seg.param(), seg.block(), seg.count(), g);
          }
        }
      }
    }
    dense_updates_.clear();
    for (const StepSums::Block& sum : sums_.SumDense()) {
      dense_updates_.push_back({sum.param, sum.block, sum.grad});
      replicas_.RecordDense(*sum.param, sum.block, sum.grad, sum.count);
    }
    ApplyDenseUpdates(scale);
    for (const auto& [table, sum] : sums_.sparse()) {
      store_.ApplySparse(table, sum.keys, sum.rows.data(), scale);
      replicas_.RecordSparse(table, sum.keys, sum.rows.data(), static_cast<int64_t>(sum.rows.size()));
    }
  }
  held_.Release(b.contributors);
  ClearPieces();
}

void PserverService::AddDueSnapshot(Checkpoint c) {
  due_.Add(std::move(c));
  if (options_.snapshot_due) options_.snapshot_due();
}

void PserverService::ObserveApply(std::chrono::steady_clock::time_point start) {
  if (!options_.metrics) return;
  options_.metrics
      ->GetHistogram("tessera_pserver_apply_seconds",
                     "applying gradients to the shard: a sync step's barrier (the trainers' sum and the "
                     "update), or one async/ssp push",
                     metrics::LatencyBuckets())
      .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void PserverService::Drain(std::vector<Reply>* out) {
  while (true) {
    auto ready = consistency_->TakeReady();
    if (ready.empty()) return PublishChanges();
    if (ready.barrier) {
      if (options_.metrics && held_.held() > 0) {
        options_.metrics
            ->GetHistogram("tessera_pserver_barrier_seconds",
                           "sync: from the first push of a step to its barrier (waiting for every trainer)",
                           metrics::LatencyBuckets())
            .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - step_opened_).count());
      }
      // The pulls answerable now and those this barrier releases get their replies' memory
      // first: the apply writes the new values there as it makes them (a pull in a wire format
      // other than float32 is narrowed or coded when answered instead).
      auto plain = [&](const PullQueue::Pending& w) REQUIRES(mu_) { return !CodedPull(w.pull); };
      pulls_.WriteByNextApply(ready.pulls, plain);
      pulls_.WriteByNextApply(ready.barrier->releases, plain);
      const auto start = std::chrono::steady_clock::now();
      ApplyBarrier(*ready.barrier);
      pulls_.ForgetWrites();
      ObserveApply(start);
      consistency_->BarrierApplied(ready.barrier->step);
      const int64_t v = consistency_->version();
      if ((options_.snapshot_every > 0 && v % options_.snapshot_every == 0) || snapshot_wanted_) {
        snapshot_wanted_ = false;
        AddDueSnapshot(CheckpointLocked());
      }
      if (cuts_.any_pending()) TakeDueCuts();
    }
    for (uint64_t t : ready.pulls) {
      pulls_.Release(t, [&](PullQueue::Pending& w) REQUIRES(mu_) {
        if (options_.metrics) {
          options_.metrics
              ->GetHistogram("tessera_pserver_pull_wait_seconds", "time a pull waited for its version",
                             metrics::LatencyBuckets())
              .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - w.since).count());
        }
        out->push_back(BuildPullReply(w.request, w.pull, std::move(w.responder), w.prepared.get()));
      });
    }
  }
}

PserverService::Reply PserverService::BuildPullReply(const wire::DataRequest& req, const SegmentList& pull,
                                                     std::unique_ptr<Responder> r,
                                                     PullQueue::Prepared* prepared) {
  Reply rep;
  rep.header.set_version(consistency_->version());
  rep.header.set_min_clock(consistency_->min_clock());
  SayDropped(req, &rep.header);
  if (prepared) {
    rep.payload = prepared->payload;
  } else if (pull.floats() > 0) {
    rep.payload = r->Allocate(pull.wire_bytes());
  }
  *rep.header.mutable_pull() = req.pull();
  std::vector<DeferredCopies::Part> dense;
  if (CodedPull(pull)) {
    rep.payload.size = CodedPullReply(pull, static_cast<char*>(rep.payload.data), &rep.header, &dense);
    if (!dense.empty()) rep.copy = store_.DeferDenseCopies(std::move(dense));
    rep.narrowed = true;
    ++counters_.pulls;
    counters_.bytes_out += static_cast<int64_t>(rep.payload.size);
    rep.responder = std::move(r);
    return rep;
  }
  float* out = static_cast<float*>(rep.payload.data);
  const uint64_t generation = store_.dense_generation();
  for (size_t i = 0; i < pull.parts().size(); ++i) {
    const SegmentList::Part& part = pull.parts()[i];
    const wire::Segment& seg = pull.segment(part);
    // Written by the apply that made the values the shard still holds: nothing to copy.
    if (prepared && prepared->written[i] == generation) continue;
    if (part.dense) {
      dense.push_back({store_.DenseValues(seg.param(), seg.block()), out + part.offset,
                       static_cast<size_t>(part.floats)});
    } else {
      // Rows may be made on first touch: under the lock.
      store_.ReadSparse(seg.param(), pull.keys(part), out + part.offset);
    }
  }
  // The dense blocks are copied after the lock (Send), by the thread that sends the reply.
  if (!dense.empty()) rep.copy = store_.DeferDenseCopies(std::move(dense));
  ++counters_.pulls;
  counters_.bytes_out += static_cast<int64_t>(pull.bytes());
  rep.responder = std::move(r);
  return rep;
}

bool PserverService::CodedPull(const SegmentList& pull) const {
  if (pull.encoded()) return true;
  if (!options_.job.wire.error_feedback()) return false;
  // Blocks whose changes are tracked: every pull of them says the token of its values.
  return std::any_of(pull.parts().begin(), pull.parts().end(),
                     [&](const SegmentList::Part& p) { return p.dense && Tracked(pull.segment(p).param()); });
}

bool PserverService::Tracked(const std::string& param) const {
  return options_.job.wire.For(param).error_feedback() && store_.ZeroGradientKeepsValues(param);
}

uint32_t PserverService::NewStampId() {
  const auto id = static_cast<uint32_t>(RandomSeed());
  return id == 0 ? 1 : id;
}

void PserverService::SyncChangeStamps() {
  if (store_.dense_generation() == stamps_generation_) return;
  stamps_.Reset(NewStampId());
  stamps_generation_ = store_.dense_generation();
}

size_t PserverService::CodedPullReply(const SegmentList& pull, char* out, wire::DataReply* header,
                                      std::vector<DeferredCopies::Part>* later) {
  // Under the lock: the changes are picked as they are read; blocks sent whole are copied (and
  // narrowed) after it, each reply by the thread that sends it, as plain pulls are.
  const bool changes = options_.job.wire.error_feedback();
  if (changes) SyncChangeStamps();
  thread_local std::vector<float> rows;
  thread_local std::vector<uint32_t> changed;
  size_t at = 0;
  for (const SegmentList::Part& part : pull.parts()) {
    const wire::Segment& seg = pull.segment(part);
    wire::Segment& said = *header->mutable_pull(part.index);
    if (!part.dense) {
      rows.resize(part.floats);
      store_.ReadSparse(seg.param(), pull.keys(part), rows.data());
      NarrowValues(rows, seg.dtype(), out + at);
      at += part.floats * ValueBytes(seg.dtype());
      continue;
    }
    const float* values = store_.DenseValues(seg.param(), seg.block());
    const bool tracked = changes && Tracked(seg.param());
    if (tracked) said.set_since(stamps_.token());
    // The changes go where they are fewer bytes than the block: at most `most` of them (the scan
    // stops there; where every element changed, as with sign pushes, at once).
    const size_t whole = part.floats * ValueBytes(seg.dtype());
    const size_t most = whole == 0 ? 0 : (whole - 1) / (sizeof(uint32_t) + sizeof(float));
    if (tracked && stamps_.ChangedSince(seg.param(), seg.block(), seg.since(), &changed, most)) {
      said.set_coding(wire::TOP_K);
      said.set_dtype(wire::FLOAT32);
      said.set_nonzeros(static_cast<int64_t>(changed.size()));
      std::memcpy(out + at, changed.data(), changed.size() * sizeof(uint32_t));
      at += changed.size() * sizeof(uint32_t);
      for (uint32_t i : changed) {
        std::memcpy(out + at, values + i, sizeof(float));
        at += sizeof(float);
      }
      continue;
    }
    later->push_back({values, out + at, static_cast<size_t>(part.floats), NarrowFunction(seg.dtype())});
    at += whole;
  }
  return at;
}

}  // namespace tessera
