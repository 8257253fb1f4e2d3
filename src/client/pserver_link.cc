// PserverLink (see pserver_link.h).
#include "client/pserver_link.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "client/wire_coder.h"
#include "common/backoff.h"
#include "job/wire_convert.h"
#include "transport/transport_factory.h"

namespace tessera {
namespace {

// The step a request belongs to: its push step, a JOIN's requested start, or for a pull the
// version it needs.
int64_t RequestStep(const wire::DataRequest& req) {
  return req.is_push() || req.op() == wire::DataRequest::JOIN ? req.step() : req.need();
}

}  // namespace

PserverLink::PserverLink(int index, PserverDirectory* directory, Owner* owner, const Transport* transport)
    : index_(index), directory_(directory), owner_(owner), transport_(transport) {
  subscription_ = directory_->Subscribe(index_, [this](int64_t epoch) { Supersede(epoch); });
  thread_ = std::thread([this] { Loop(kMainLane); });
}

PserverLink::~PserverLink() { Close(); }

void PserverLink::Supersede(int64_t epoch) {
  for (Lane& lane : lanes_) {
    MutexLock lock(&lane.mu);
    if (!lane.conn || lane.target.epoch == 0 || lane.target.epoch == epoch ||
        lane.aborted_epoch == lane.target.epoch)
      continue;
    lane.aborted_epoch = lane.target.epoch;
    if (&lane == &lanes_[kMainLane]) {
      spdlog::warn("pserver {} at epoch {} {}: abandoning calls to it", index_, lane.target.epoch,
                   epoch == 0 ? "lost its registration" : "was replaced by epoch " + std::to_string(epoch));
    }
    lane.conn->Abort();
  }
}

void PserverLink::Close() {
  if (subscription_) {
    directory_->Unsubscribe(subscription_);
    subscription_ = 0;
  }
  std::thread second;
  {
    MutexLock lock(&mu_);
    closing_ = true;
    second = std::move(lane_thread_);
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  if (second.joinable()) second.join();
}

std::string PserverLink::transport_name() const {
  MutexLock lock(&mu_);
  return chosen_name_;
}

void PserverLink::Post(std::function<void()> fn) {
  {
    MutexLock lock(&mu_);
    queue_.push_back(Job{0, 0, [fn = std::move(fn)](int) {
                           fn();
                           return true;
                         }});
  }
  cv_.NotifyAll();
}

uint64_t PserverLink::Submit(std::shared_ptr<LinkCall> call, std::chrono::milliseconds timeout, bool recover,
                             Done done, uint64_t group, bool wake) {
  // The deadline runs from the first start; a job put back to recover (the same closure, moved)
  // keeps it, and its `before` runs once.
  auto fn = [this, call, timeout, recover, deadline = std::optional<Deadline>(),
             done = std::move(done)](int lane) mutable {
    if (!deadline) {
      deadline.emplace(timeout);
      if (call->before) call->before(*call);
    }
    int64_t resume = -1;
    bool needs_recovery = false;
    auto r = RunOn(lane, *call, *deadline, recover && lane == kMainLane, &resume, &needs_recovery);
    if (needs_recovery && recover && lane != kMainLane) return false;
    if (r.ok() && call->after) call->after();
    if (r.ok() && call->after_reply) call->after_reply(*r);
    done(r.status(), r.ok() ? *r : wire::DataReply(), resume);
    return true;
  };
  uint64_t id;
  {
    MutexLock lock(&mu_);
    id = next_job_++;
    queue_.push_back(Job{id, group, std::move(fn)});
    if (group != 0 && !lane_thread_.joinable() && !closing_)
      lane_thread_ = std::thread([this] { Loop(kSecondLane); });
  }
  if (wake) cv_.NotifyAll();
  return id;
}

bool PserverLink::CanStart(int lane) const {
  return !queue_.empty() && MayStartOnLane(lane, queue_.front().group, lanes_state_);
}

void PserverLink::RunJob(int lane, Job job) {
  const bool finished = job.fn(lane);
  bool wake;
  {
    MutexLock lock(&mu_);
    lanes_state_.running[lane] = false;
    lanes_state_.group[lane] = 0;
    if (!finished) {
      job.group = 0;  // it runs alone, on the main lane, where it may recover the pserver
      queue_.push_front(std::move(job));
    }
    // The lanes wait for a job to start or for closing, nothing else: on the common path (one
    // call a step, run inline) no link thread is woken for nothing.
    wake = !queue_.empty() || closing_;
  }
  if (wake) cv_.NotifyAll();
}

bool PserverLink::RunInline(uint64_t id) {
  Job job;
  {
    MutexLock lock(&mu_);
    if (closing_ || !CanStart(kMainLane) || queue_.front().id != id) return false;
    job = std::move(queue_.front());
    queue_.pop_front();
    lanes_state_.running[kMainLane] = true;
    lanes_state_.group[kMainLane] = job.group;
  }
  RunJob(kMainLane, std::move(job));
  return true;
}

void PserverLink::Loop(int lane) {
  while (true) {
    Job job;
    {
      MutexLock lock(&mu_);
      // The main lane runs what is left at closing (its calls see closing_ and end at once),
      // including a job the second lane puts back, so it leaves only when both lanes are idle.
      cv_.Wait(&mu_, [&]() REQUIRES(mu_) {
        return CanStart(lane) ||
               (closing_ && (lane == kSecondLane ||
                             (queue_.empty() && !lanes_state_.running[0] && !lanes_state_.running[1])));
      });
      if (!CanStart(lane)) return;  // closing
      job = std::move(queue_.front());
      queue_.pop_front();
      lanes_state_.running[lane] = true;
      lanes_state_.group[lane] = job.group;
    }
    RunJob(lane, std::move(job));
  }
}

StatusOr<ClientConnection*> PserverLink::Connect(Lane& lane, bool main, const Deadline& deadline,
                                                 int64_t not_epoch) {
  TESSERA_ASSIGN_OR_RETURN(PserverAddress a, directory_->Resolve(index_, deadline, not_epoch));
  if (!lane.own_conn() || a.address != lane.own_target().address || a.epoch != lane.own_target().epoch) {
    const TransportKind excluded =
        a.epoch == lane.shm_failed_epoch ? TransportKind::kShm : TransportKind::kAuto;
    auto choice = ChooseEndpoint(a.endpoints, transport_->wanted, transport_->host_id, excluded);
    if (!choice.ok()) return choice.status().WithContext("pserver " + std::to_string(index_));
    if (main &&
        (!lane.own_conn() || a.epoch != lane.own_target().epoch || choice->kind != lane.chosen.kind)) {
      spdlog::info("pserver {} at {} over {} (epoch {})", index_, choice->endpoint,
                   TransportKindName(choice->kind), a.epoch);
    }
    {
      MutexLock lock(&lane.mu);
      lane.conn = NewClientConnection(choice->kind, choice->endpoint, transport_->options);
      lane.target = a;
    }
    lane.chosen = *choice;
    if (main) {
      MutexLock lock(&mu_);
      chosen_name_ = TransportKindName(choice->kind);
    }
  }
  return lane.own_conn();
}

StatusOr<wire::DataReply> PserverLink::RunOn(int lane_index, LinkCall& call, const Deadline& deadline,
                                             bool recover, int64_t* resume_step, bool* needs_recovery) {
  Lane& lane = lanes_[lane_index];
  const bool main = lane_index == kMainLane;
  Backoff backoff({std::chrono::milliseconds(50), std::chrono::milliseconds(1000), 2.0, 0.2});
  int64_t avoid_epoch = -1;  // after a stale-epoch answer: wait for a newer registration
  Status last = Status::Unavailable("pserver " + std::to_string(index_) + " was not reached");
  while (true) {
    bool closing;
    {
      MutexLock lock(&mu_);
      closing = closing_;
    }
    if (closing) return Status::Cancelled("client is closing");
    if (deadline.expired()) {
      return Status(last.code() == StatusCode::kOk ? StatusCode::kDeadlineExceeded : last.code(),
                    "pserver " + std::to_string(index_) + ": gave up after retrying: " + last.message());
    }
    auto conn = Connect(lane, main, Deadline::At(std::min(deadline.at(), Now() + std::chrono::seconds(2))),
                        avoid_epoch);
    if (!conn.ok()) {
      // Closing, or a transport this pserver does not serve: retrying will not help.
      if (conn.status().code() == StatusCode::kCancelled ||
          conn.status().code() == StatusCode::kFailedPrecondition)
        return conn.status();
      // Not registered: the directory waited for a registration already; look again at once,
      // so a replacement is used the moment it appears.
      if (conn.status().code() == StatusCode::kNotFound) {
        last = Status::Unavailable(conn.status().message());
        continue;
      }
      last = conn.status();
      std::this_thread::sleep_for(std::min(backoff.Next(), deadline.remaining()));
      continue;
    }
    avoid_epoch = -1;
    owner_->Stamp(&call.req);
    call.req.set_pserver_index(index_);
    call.req.set_pserver_epoch(lane.own_target().epoch);
    // In a wire format: encoded once (the header says how many elements a TOP_K push sends), and
    // sent and answered through the call's own bytes.
    const bool coded = transport_->coder && transport_->coder->Applies(call);
    if (coded) TESSERA_RETURN_IF_ERROR(transport_->coder->Encode(&call));
    const ConstBuffer coded_payload =
        call.wire_stream
            ? ConstBuffer{call.wire_stream->data(), call.wire_stream->size(), call.wire_stream.get()}
            : ConstBuffer{call.wire_payload.data(), call.wire_payload.size()};
    // The reply's bytes come into the lane's buffer, kept from call to call: a fresh one of tens of
    // MB, zeroed, each step cost the trainer more than the decoding.
    if (coded && lane.coded_reply.size() < call.wire_reply_bytes)
      lane.coded_reply.resize(call.wire_reply_bytes);
    // Over tcp its values are widened into the caller's buffers as they come.
    std::optional<WireCoder::ReplyDecoder> decoder;
    if (coded) decoder.emplace(transport_->coder.get(), &call, lane.coded_reply.data());
    const MutableBuffer coded_reply{lane.coded_reply.data(), coded ? call.wire_reply_bytes : 0, nullptr,
                                    decoder ? &*decoder : nullptr};
    std::string header = call.req.SerializeAsString();
    auto result = coded ? (*conn)->Call(header,
                                        coded_payload.size ? std::span<const ConstBuffer>(&coded_payload, 1)
                                                           : std::span<const ConstBuffer>{},
                                        coded_reply.size ? std::span<const MutableBuffer>(&coded_reply, 1)
                                                         : std::span<const MutableBuffer>{},
                                        deadline.remaining())
                        : (*conn)->Call(header, call.payload, call.reply, deadline.remaining());
    if (!result.ok()) {
      last = result.status();
      // A reply too large, a request past the limits, or the job's secret refused: retrying
      // would not help.
      if (last.code() == StatusCode::kDataLoss || last.code() == StatusCode::kInvalidArgument ||
          last.code() == StatusCode::kUnauthenticated) {
        return last;
      }
      if (lane.chosen.kind == TransportKind::kShm && transport_->wanted == TransportKind::kAuto &&
          last.code() == StatusCode::kPermissionDenied) {
        // It listens but this process may not reach it (a sandbox?): the next transport for this
        // registration (a replacement registers anew and is tried over shared memory again).
        if (main) spdlog::warn("pserver {}: {}; using the next transport", index_, last.message());
        lane.shm_failed_epoch = lane.own_target().epoch;
        MutexLock lock(&lane.mu);
        lane.conn.reset();
        continue;
      }
      std::this_thread::sleep_for(std::min(backoff.Next(), deadline.remaining()));
      continue;
    }
    wire::DataReply reply;
    if (!reply.ParseFromArray(result->header.data(), static_cast<int>(result->header.size()))) {
      return Status::DataLoss("pserver " + std::to_string(index_) + " sent a malformed reply header");
    }
    Status s = ReplyStatus(reply);
    if (s.ok()) {
      // A piece's pull that the pserver left for the last piece (pull_deferred) has no values.
      const bool deferred = reply.pull_deferred() && result->payload_bytes == 0;
      if (coded && !deferred && call.req.pull_size() > 0) {
        // Its size depends on what changed: checked against the reply's own segments.
        Status d = decoder->Finish(reply, result->payload_bytes);
        if (!d.ok()) return Status::DataLoss("pserver " + std::to_string(index_) + ": " + d.message());
      } else if (!coded && result->payload_bytes != TotalSize(call.reply) && !deferred) {
        return Status::DataLoss("pserver " + std::to_string(index_) + " sent " +
                                std::to_string(result->payload_bytes) + " payload bytes for a pull of " +
                                std::to_string(TotalSize(call.reply)));
      }
      return reply;
    }
    last = s;
    switch (reply.reason()) {
      case wire::DataReply::STALE_EPOCH:
        avoid_epoch = lane.own_target().epoch;
        continue;
      case wire::DataReply::NOT_SERVING:
        std::this_thread::sleep_for(std::min(backoff.Next(), deadline.remaining()));
        continue;
      case wire::DataReply::NOT_INITIALIZED:
      case wire::DataReply::NOT_JOINED: {
        if (!recover) {
          if (needs_recovery) *needs_recovery = true;
          return s;
        }
        const int64_t step = RequestStep(call.req);
        Status r = reply.reason() == wire::DataReply::NOT_INITIALIZED
                       ? owner_->Reinitialize(*this, deadline, step)
                       : owner_->Rejoin(*this, deadline, step);
        if (!r.ok()) {
          last = r;
          continue;
        }
        if (call.req.is_push() && call.req.piece() > 0) {
          // The pserver lost this step's earlier pieces (it restarted): the trainer's push for the
          // step cannot be completed there, so the trainer goes on from the next step.
          if (Status j = owner_->Rejoin(*this, deadline, step + 1); !j.ok()) {
            last = j;
            continue;
          }
          if (resume_step) *resume_step = step + 1;
          return Status::Aborted(
              "pserver " + std::to_string(index_) + " restarted during step " + std::to_string(step) +
              " and lost this trainer's earlier pieces; resume at step " + std::to_string(step + 1));
        }
        continue;
      }
      case wire::DataReply::STEP_CLOSED:
        if (resume_step) *resume_step = reply.resume_step();
        return Status::Aborted("pserver " + std::to_string(index_) + ": " + s.message());
      default:
        return Status(s.code(), "pserver " + std::to_string(index_) + ": " + s.message());
    }
  }
}

}  // namespace tessera
