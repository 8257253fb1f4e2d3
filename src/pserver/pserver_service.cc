// PserverService (see pserver_service.h).
#include "pserver/pserver_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/finite.h"
#include "common/strings.h"
#include "job/wire_codec.h"
#include "pserver/optimizer.h"
#include "pserver/push_plan.h"
#include "pserver/push_widener.h"

namespace tessera {
namespace {

using Reason = wire::DataReply::Reason;

Reason ReasonFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kAborted:
      return wire::DataReply::STEP_CLOSED;
    case StatusCode::kFailedPrecondition:
      return wire::DataReply::NOT_JOINED;
    default:
      return wire::DataReply::BAD_REQUEST;
  }
}

}  // namespace

PserverService::PserverService(PserverServiceOptions options)
    : options_(std::move(options)),
      due_(options_.index, DueSnapshots::Limits{}),
      store_(options_.index, options_.job, options_.slots),
      consistency_(std::make_unique<Consistency>(ConsistencyOptions(), 0)),
      epoch_(options_.epoch),
      backup_(options_.backup),
      replicas_(options_.job.token, options_.index) {
  if (options_.apply_threads != 1) {
    pool_ = std::make_unique<WorkPool>(options_.apply_threads);
    MutexLock lock(&mu_);
    if (pool_->size() > 1) store_.SetPool(pool_.get());
  }
}

PserverService::~PserverService() { StopServing(Status::Unavailable("pserver is shutting down")); }

void PserverService::SendError(Responder& r, const Status& s, Reason reason, int64_t resume) {
  wire::DataReply reply;
  reply.set_code(static_cast<int>(s.code()));
  reply.set_message(s.message());
  reply.set_reason(reason);
  reply.set_resume_step(resume);
  std::string h = reply.SerializeAsString();
  r.Send(h, {});
}

namespace {

// A reply's copy made as the reply goes (Responder::SendMade): the parts before each run of it.
class CopiedAsSent : public PayloadFiller {
 public:
  CopiedAsSent(DeferredCopies::Ticket copy, const char* base) : copy_(std::move(copy)), base_(base) {}
  void Fill(size_t bytes) override { copy_.RunUpTo(base_ + bytes); }

 private:
  DeferredCopies::Ticket copy_;  // dropped with the filler: what was not made is cancelled
  const char* base_;
};

// Narrowed replies this large are made as they go: over tcp their narrowing (10 ms for 55 MB of
// values) overlaps the link instead of delaying its first byte. A float32 copy (a memcpy) is
// still made before the reply is handed over.
constexpr size_t kMadeAsSentBytes = size_t{1} << 20;

}  // namespace

void PserverService::Send(Reply& reply) {
  thread_local std::string h;  // reused: no allocation per reply once grown
  reply.header.SerializeToString(&h);
  if (reply.narrowed && !reply.copy.empty() && reply.payload.size >= kMadeAsSentBytes) {
    const char* base = static_cast<const char*>(reply.payload.data);
    reply.responder->SendMade(h, reply.payload, std::make_unique<CopiedAsSent>(std::move(reply.copy), base));
    return;
  }
  reply.copy.Run();
  ConstBuffer b{reply.payload.data, reply.payload.size};
  reply.responder->Send(
      h, reply.payload.size == 0 ? std::span<const ConstBuffer>{} : std::span<const ConstBuffer>(&b, 1));
}

namespace {

// Observes the time a request takes to handle (not counting a pull's wait for its version).
class HandleTimer {
 public:
  HandleTimer(metrics::Registry* r, const wire::DataRequest& req) : r_(r), req_(req) {}
  ~HandleTimer() {
    if (!r_) return;
    std::string op = wire::DataRequest::Op_Name(req_.op());
    for (char& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r_->GetHistogram("tessera_pserver_request_seconds", "time to handle a request, by operation",
                     metrics::LatencyBuckets(), {{"op", op.empty() ? "unknown" : op}})
        .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }

 private:
  metrics::Registry* r_;
  const wire::DataRequest& req_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

RequestWatcher* PserverService::Watch(std::string_view header, size_t payload_bytes) {
  PushWidener& w = PushWidener::ForThisThread();
  // No larger than a push whose segments this shard has read: what the widener allocates is
  // bounded by the model, not by what a peer claims. (Begin forgets the request before, always.)
  const bool sized = payload_bytes <= watch_limit_.load(std::memory_order_relaxed);
  return w.Begin(header, sized ? payload_bytes : 0) ? &w : nullptr;
}

void PserverService::Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> r) {
  wire::DataRequest req;
  HandleTimer timer(options_.metrics, req);
  if (!req.ParseFromArray(header.data(), static_cast<int>(header.size()))) {
    return SendError(
        *r, Status::InvalidArgument("malformed request header (" + std::to_string(header.size()) + " bytes)"),
        wire::DataReply::BAD_REQUEST);
  }
  if (req.job_token() != options_.job.token) {
    return SendError(*r, Status::PermissionDenied("request for another job: the job token does not match"),
                     wire::DataReply::BAD_REQUEST);
  }
  if (options_.lease_alive && !options_.lease_alive()) {
    return SendError(*r,
                     Status::Unavailable("pserver " + std::to_string(options_.index) +
                                         " is not serving: its lease is not confirmed alive"),
                     wire::DataReply::NOT_SERVING);
  }
  if (!serving_) {
    MutexLock lock(&mu_);
    return SendError(*r,
                     Status::Unavailable("pserver " + std::to_string(options_.index) +
                                         " is not serving: " + stop_reason_.message()),
                     wire::DataReply::NOT_SERVING);
  }
  if (req.op() == wire::DataRequest::REPLICATE) return HandleReplicate(req, payload, std::move(r));
  const int64_t epoch = epoch_.load();
  bool any_epoch = req.op() == wire::DataRequest::STATUS && req.pserver_epoch() == 0;
  if (!any_epoch && (req.pserver_index() != options_.index || req.pserver_epoch() != epoch)) {
    return SendError(*r,
                     Status::FailedPrecondition(
                         "stale epoch: this is pserver " + std::to_string(options_.index) +
                         (epoch == 0 ? " as a backup replica" : " at epoch " + std::to_string(epoch)) +
                         ", the request was for pserver " + std::to_string(req.pserver_index()) +
                         " at epoch " + std::to_string(req.pserver_epoch())),
                     wire::DataReply::STALE_EPOCH);
  }
  switch (req.op()) {
    case wire::DataRequest::DATA:
      return HandleData(req, payload, std::move(r));
    case wire::DataRequest::INIT:
      return HandleInit(req, payload, std::move(r));
    case wire::DataRequest::INIT_DONE:
      return HandleInitDone(req, std::move(r));
    case wire::DataRequest::STATUS:
      return HandleStatus(std::move(r));
    case wire::DataRequest::DESCRIBE:
      return HandleDescribe(std::move(r));
    case wire::DataRequest::EXPORT_CUT:
    case wire::DataRequest::EXPORT_READ:
    case wire::DataRequest::EXPORT_RELEASE:
      return HandleExport(req, std::move(r));
    case wire::DataRequest::JOIN:
    case wire::DataRequest::LEAVE:
      return HandleMembership(req, std::move(r));
    default:
      return SendError(*r, Status::InvalidArgument("unknown request op " + std::to_string(req.op())),
                       wire::DataReply::BAD_REQUEST);
  }
}

// A trainer joining the consistency group (at the step the reply names) or leaving it; either
// may close a step, whose replies go out with this one.
void PserverService::HandleMembership(const wire::DataRequest& req, std::unique_ptr<Responder> r) {
  std::vector<Reply> replies;
  Reply rep;
  {
    MutexLock lock(&mu_);
    if (!initialized_) {
      return SendError(
          *r, Status::FailedPrecondition("pserver " + std::to_string(options_.index) + " is not initialized"),
          wire::DataReply::NOT_INITIALIZED);
    }
    if (req.op() == wire::DataRequest::JOIN) {
      auto start = consistency_->Join(req.trainer(), req.trainer_epoch(), req.step());
      if (!start.ok()) return SendError(*r, start.status(), wire::DataReply::BAD_REQUEST);
      rep.header.set_start_step(*start);
    } else {
      consistency_->Leave(req.trainer(), req.trainer_epoch());
    }
    Drain(&replies);
    rep.header.set_version(consistency_->version());
    rep.header.set_min_clock(consistency_->min_clock());
    rep.responder = std::move(r);
    replies.push_back(std::move(rep));
    HoldUntilCommitted(&replies);
  }
  for (auto& x : replies) Send(x);
}

void PserverService::HandleData(wire::DataRequest& req, ConstBuffer payload, std::unique_ptr<Responder> r) {
  // Counted for /metrics: a trainer's link runs two pieces at once, trainers push together.
  if (data_in_progress_.fetch_add(1, std::memory_order_relaxed) > 0)
    data_overlapped_.fetch_add(1, std::memory_order_relaxed);
  struct Leave {
    std::atomic<int>& n;
    ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
  } leave{data_in_progress_};
  // Finiteness first, without the lock: a pass over the payload at memory speed. Always: a
  // non-finite value would poison the model whatever the trainer says.
  int64_t nonfinite = -1;
  const bool wire_format = std::any_of(req.push().begin(), req.push().end(), Encoded);
  if (wire_format) {
    nonfinite = kNotScanned;
  } else if (payload.size % sizeof(float) == 0) {
    nonfinite =
        FirstNonFinite(static_cast<const float*>(payload.data), payload.size / sizeof(float), pool_.get());
  }
  std::vector<Reply> replies;
  {
    MutexLock lock(&mu_);
    if (!initialized_) {
      lock.Unlock();
      return SendError(
          *r, Status::FailedPrecondition("pserver " + std::to_string(options_.index) + " is not initialized"),
          wire::DataReply::NOT_INITIALIZED);
    }
    DataCheck c;
    if (Status bad = CheckData(req, &payload, nonfinite, &c); !bad.ok()) {
      RefusePush(req, bad, &replies);
      HoldUntilCommitted(&replies);
      lock.Unlock();
      for (auto& x : replies) Send(x);
      return SendError(*r, bad, wire::DataReply::BAD_REQUEST);
    }
    DataAnswer answer;
    answer.need = req.need();
    if (req.is_push()) {
      if (Status refused = CountPush(req, payload, c, *r, &replies, &answer); !refused.ok()) {
        HoldUntilCommitted(&replies);
        lock.Unlock();
        return SendError(*r, refused, ReasonFor(refused), answer.resume);
      }
    }
    if (Status bad = AnswerData(req, c, r, answer, &replies); !bad.ok()) {
      HoldUntilCommitted(&replies);
      lock.Unlock();
      for (auto& x : replies) Send(x);
      return SendError(*r, bad, wire::DataReply::BAD_REQUEST);
    }
    HoldUntilCommitted(&replies);
  }
  // A barrier that made a checkpoint due while the last ones are still being written: the step's
  // replies wait for the checkpoint thread.
  due_.WaitForRoom(serving_);
  for (auto& x : replies) Send(x);
}

Status PserverService::CheckData(wire::DataRequest& req, ConstBuffer* payload, int64_t nonfinite,
                                 DataCheck* c) {
  auto push = SegmentList::Read(store_, req.push(), SegmentList::Use::kPush, /*wire_formats=*/true);
  TESSERA_RETURN_IF_ERROR(push.status());
  TESSERA_RETURN_IF_ERROR(push->CheckPayload(payload->size));
  c->received_bytes = payload->size;
  if (push->encoded()) {
    // Decoded into float32 before anything reads it; the pserver's state stays float32.
    // Pushes this large are known good in size: the next may be widened as it comes (Watch).
    if (payload->size > watch_limit_.load(std::memory_order_relaxed))
      watch_limit_.store(payload->size, std::memory_order_relaxed);
    PushWidener& came = PushWidener::ForThisThread();
    c->widened = came.floats();  // the connection thread's buffer, grown once, either way
    if (came.Take(payload->size) && push->PlainOf(came.dtype())) {
      // Widened and scanned as its bytes came (tcp), value by value: what Widen would make.
      push->Widened(req.mutable_push());
      nonfinite = came.first_nonfinite();
      ++counters_.widened_as_they_came;
    } else {
      TESSERA_RETURN_IF_ERROR(push->Widen(payload->data, req.mutable_push(), c->widened));
      nonfinite = FirstNonFinite(reinterpret_cast<const float*>(c->widened->data()),
                                 c->widened->size() / sizeof(float), pool_.get());
    }
    *payload = ConstBuffer{c->widened->data(), c->widened->size()};
  }
  if (req.is_push() && !push->empty() && req.samples() < 1) {
    return Status::InvalidArgument("a push with gradients needs a sample count >= 1, got " +
                                   std::to_string(req.samples()));
  }
  if (nonfinite >= 0) {
    const std::string why = NonFiniteGradient(push->Describe(static_cast<size_t>(nonfinite)));
    if (!TakesNonFiniteAsSkipped(req)) return Status::InvalidArgument(why + "; nothing was applied");
    // The trainer left the scan to us: its dropped gradient, the empty push it would have sent
    // itself (the reply says why: `dropped`).
    req.clear_push();
    req.set_samples(0);
    req.set_skipped(why);
    c->found_here = true;
    push = SegmentList::Read(store_, req.push(), SegmentList::Use::kPush);
    *payload = ConstBuffer{};
  }
  auto pull = SegmentList::Read(store_, req.pull(), SegmentList::Use::kPull, /*wire_formats=*/true);
  TESSERA_RETURN_IF_ERROR(pull.status());
  c->push.emplace(std::move(*push));
  c->pull.emplace(std::move(*pull));
  // A piece: its numbering is checked here too (nothing is kept when it is refused). A piece
  // standing for a dropped gradient (skipped) ends the push without what it sent.
  c->drop_pieces = req.is_push() && InPieces(req) && !req.skipped().empty();
  if (req.is_push() && InPieces(req) && !c->drop_pieces) {
    c->piece_verdict = ArrivePiece(req, *c->push, &c->arrival);
    if (!c->piece_verdict->ok() && c->piece_verdict->status().code() == StatusCode::kInvalidArgument)
      return c->piece_verdict->status();
  }
  return Status::OK();
}

Status PserverService::CountPush(wire::DataRequest& req, ConstBuffer payload, DataCheck& c, Responder& r,
                                 std::vector<Reply>* replies, DataAnswer* answer) {
  // A piece that is not the push's last missing one is kept, not counted (kStored).
  const bool stored = c.arrival == StepPieces::Arrival::kStored;
  if (c.drop_pieces && consistency_->CheckPiece(req.trainer(), req.trainer_epoch(), req.step()).ok()) {
    pieces_.Drop(req.trainer());
    held_.Drop(req.trainer());
  }
  const int64_t version_before = consistency_->version();
  auto verdict = c.piece_verdict && (!c.arrival || stored)
                     ? *c.piece_verdict
                     : consistency_->Push(req.trainer(), req.trainer_epoch(), req.step());
  if (!verdict.ok()) {
    answer->resume = consistency_->ResumeStep(req.trainer());
    return verdict.status();
  }
  PushFacts facts;
  facts.stored_piece = stored;
  facts.async_piece = c.piece_verdict && options_.job.mode.kind == ConsistencyMode::Kind::kAsync;
  facts.version_moved = consistency_->version() > version_before;
  facts.samples = req.samples();
  facts.in_pieces = InPieces(req);
  facts.pulls_floats = c.pull->floats() > 0;
  facts.replicated_sync = replicated() && options_.job.mode.kind == ConsistencyMode::Kind::kSync;
  const PushPlan plan = PlanPush(*verdict, facts);
  if (plan.late) {
    ++counters_.late;
    answer->resume = consistency_->ResumeStep(req.trainer());
    spdlog::debug(
        "pserver {}: trainer {}'s push for step {} came after the step closed (backup trainers); "
        "dropped, it goes on from step {}",
        options_.index, req.trainer(), req.step(), answer->resume);
  } else if (plan.new_data) {
    counters_.pushes += plan.counts ? 1 : 0;
    counters_.bytes_in += static_cast<int64_t>(c.received_bytes);
    if (!req.skipped().empty()) {
      ++counters_.skipped;
      spdlog::warn("pserver {}: trainer {} dropped its gradient for step {}: {}{}", options_.index,
                   req.trainer(), req.step(), req.skipped(),
                   c.found_here ? " (found by this pserver's scan)" : "");
    }
  }
  if (plan.prepare_pull && !CodedPull(*c.pull)) {  // the apply writes float32 values, all of them
    answer->prepared = PullQueue::Prepare(*c.pull, r);
    if (answer->prepared) pulls_.WriteByNextApply(answer->prepared.get(), &*c.pull);
  }
  if (plan.hold) {
    HoldPiece(req, std::move(*c.push), payload, plan.hold_complete);
  } else if (plan.apply_now) {
    const auto start = std::chrono::steady_clock::now();
    ApplyPush(*c.push, static_cast<const float*>(payload.data), 1.0f / static_cast<float>(req.samples()));
    ObserveApply(start);
  }
  if (plan.apply_ready) ApplyReadyBlocks(replies);
  Drain(replies);
  pulls_.ForgetWrites();
  // Still waiting for the other trainers (or pieces): the push keeps a copy of what it needs.
  if (plan.hold) held_.KeepBorrowed(req.trainer(), c.widened);
  if (plan.wait_for_step) answer->need = std::max(answer->need, req.step() + 1);
  return Status::OK();
}

Status PserverService::AnswerData(wire::DataRequest& req, DataCheck& c, std::unique_ptr<Responder>& r,
                                  DataAnswer& answer, std::vector<Reply>* replies) {
  // A request with `need` and nothing to pull still waits for that version: a sync trainer must
  // not run ahead of a pserver that holds none of the parameters it pulls. A pull of a block
  // already a step ahead waits for the barrier, unless it is a piece's.
  const bool piece_pull = req.is_push() && InPieces(req);
  SegmentList& pull = *c.pull;
  if (mixed() && !piece_pull && PullsAnEarlyBlock(pull))
    answer.need = std::max(answer.need, consistency_->version() + 1);
  if (piece_pull && PieceAnswerable(req, pull)) {
    replies->push_back(BuildPullReply(req, pull, std::move(r)));
    replies->back().header.set_version(req.need());
  } else if (piece_pull && req.more_pieces()) {
    // A piece that is not the last never waits: the trainer's next pieces come after it on the
    // same link, and the barrier may need them.
    Reply ack;
    ack.header.set_version(consistency_->version());
    ack.header.set_min_clock(consistency_->min_clock());
    ack.header.set_resume_step(answer.resume);
    ack.header.set_pull_deferred(req.pull_size() > 0);
    ack.responder = std::move(r);
    replies->push_back(std::move(ack));
  } else if (req.pull_size() > 0 || answer.need > 0) {
    uint64_t ticket = pulls_.NextTicket();
    auto now = consistency_->Pull(ticket, req.trainer(), req.trainer_epoch(), answer.need);
    if (!now.ok()) return now.status();
    if (*now) {
      replies->push_back(BuildPullReply(req, pull, std::move(r), answer.prepared.get()));
      replies->back().header.set_resume_step(answer.resume);
    } else {
      pulls_.Park(ticket, piece_pull, req, std::move(pull), std::move(r), std::move(answer.prepared),
                  std::chrono::steady_clock::now());
    }
  } else {
    Reply ack;
    ack.header.set_version(consistency_->version());
    ack.header.set_min_clock(consistency_->min_clock());
    ack.header.set_resume_step(answer.resume);
    SayDropped(req, &ack.header);
    ack.responder = std::move(r);
    replies->push_back(std::move(ack));
  }
  return Status::OK();
}

void PserverService::RefusePush(const wire::DataRequest& req, const Status& why,
                                std::vector<Reply>* replies) {
  if (!req.is_push()) return;
  ++counters_.refused;
  spdlog::warn("pserver {}: refused trainer {}'s push for step {}: {}", options_.index, req.trainer(),
               req.step(), why.message());
  // Where the consistency rule takes the push, it is the trainer's push for the step, with
  // nothing in it: the step closes here as on the pservers that took the rest of it.
  auto verdict = consistency_->Push(req.trainer(), req.trainer_epoch(), req.step());
  if (!verdict.ok()) return;
  if (*verdict == Consistency::PushVerdict::kHold) {
    // Pieces it sent before are dropped with it (blocks already applied keep their share).
    pieces_.Drop(req.trainer());
    if (held_.HoldEmpty(req.trainer())) step_opened_ = std::chrono::steady_clock::now();
  }
  Drain(replies);
}

void PserverService::HoldPiece(wire::DataRequest& req, SegmentList list, ConstBuffer payload, bool counted) {
  // A push standing for a dropped gradient adds no samples to the step, whatever it says.
  const int64_t samples = req.skipped().empty() ? req.samples() : 0;
  // The request's segments are not read after this.
  if (held_.Hold(req.trainer(), req.piece(), samples, req.mutable_push(), std::move(list), payload, counted))
    step_opened_ = std::chrono::steady_clock::now();
}

}  // namespace tessera
