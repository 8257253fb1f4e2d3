// PserverLink (see pserver_link.h).
#include "client/pserver_link.h"

#include <spdlog/spdlog.h>

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
  thread_ = std::thread([this] { Loop(); });
}

PserverLink::~PserverLink() { Close(); }

void PserverLink::Supersede(int64_t epoch) {
  MutexLock lock(&conn_mu_);
  if (!conn_ || target_.epoch == 0 || target_.epoch == epoch || aborted_epoch_ == target_.epoch) return;
  aborted_epoch_ = target_.epoch;
  spdlog::warn("pserver {} at epoch {} {}: abandoning calls to it", index_, target_.epoch,
               epoch == 0 ? "lost its registration" : "was replaced by epoch " + std::to_string(epoch));
  conn_->Abort();
}

void PserverLink::Close() {
  if (subscription_) {
    directory_->Unsubscribe(subscription_);
    subscription_ = 0;
  }
  {
    MutexLock lock(&mu_);
    closing_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

std::string PserverLink::transport_name() const {
  MutexLock lock(&mu_);
  return chosen_name_;
}

void PserverLink::Post(std::function<void()> fn) {
  {
    MutexLock lock(&mu_);
    queue_.push_back(Job{0, std::move(fn)});
  }
  cv_.NotifyAll();
}

uint64_t PserverLink::Submit(std::shared_ptr<LinkCall> call, std::chrono::milliseconds timeout, bool recover,
                             Done done) {
  auto fn = [this, call, timeout, recover, done = std::move(done)] {
    Deadline deadline(timeout);
    int64_t resume = -1;
    if (call->before) call->before(*call);
    auto r = Run(*call, deadline, recover, &resume);
    if (r.ok() && call->after) call->after();
    if (r.ok() && call->after_reply) call->after_reply(*r);
    done(r.status(), r.ok() ? *r : wire::DataReply(), resume);
  };
  uint64_t id;
  {
    MutexLock lock(&mu_);
    id = next_job_++;
    queue_.push_back(Job{id, std::move(fn)});
  }
  cv_.NotifyAll();
  return id;
}

bool PserverLink::RunInline(uint64_t id) {
  Job job;
  {
    MutexLock lock(&mu_);
    if (running_ || closing_ || queue_.empty() || queue_.front().id != id) return false;
    job = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
  }
  job.fn();
  bool wake;
  {
    MutexLock lock(&mu_);
    running_ = false;
    wake = !queue_.empty() || closing_;  // the link thread waits for exactly these
  }
  if (wake) cv_.NotifyAll();
  return true;
}

void PserverLink::Loop() {
  while (true) {
    Job job;
    {
      MutexLock lock(&mu_);
      cv_.Wait(&mu_,
               [&]() REQUIRES(mu_) { return (closing_ && !running_) || (!queue_.empty() && !running_); });
      if (queue_.empty()) return;  // closing, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    job.fn();
    {
      MutexLock lock(&mu_);
      running_ = false;
    }
  }
}

StatusOr<ClientConnection*> PserverLink::Connect(const Deadline& deadline, int64_t not_epoch) {
  TESSERA_ASSIGN_OR_RETURN(PserverAddress a, directory_->Resolve(index_, deadline, not_epoch));
  if (!OwnConnection() || a.address != OwnTarget().address || a.epoch != OwnTarget().epoch) {
    const TransportKind excluded = a.epoch == shm_failed_epoch_ ? TransportKind::kShm : TransportKind::kAuto;
    auto choice = ChooseEndpoint(a.endpoints, transport_->wanted, transport_->host_id, excluded);
    if (!choice.ok()) return choice.status().WithContext("pserver " + std::to_string(index_));
    if (!OwnConnection() || a.epoch != OwnTarget().epoch || choice->kind != chosen_.kind) {
      spdlog::info("pserver {} at {} over {} (epoch {})", index_, choice->endpoint,
                   TransportKindName(choice->kind), a.epoch);
    }
    {
      MutexLock lock(&conn_mu_);
      conn_ = NewClientConnection(choice->kind, choice->endpoint, transport_->options);
      target_ = a;
    }
    chosen_ = *choice;
    MutexLock lock(&mu_);
    chosen_name_ = TransportKindName(choice->kind);
  }
  return OwnConnection();
}

StatusOr<wire::DataReply> PserverLink::Run(LinkCall& call, const Deadline& deadline, bool recover,
                                           int64_t* resume_step) {
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
    auto conn = Connect(Deadline::At(std::min(deadline.at(), Now() + std::chrono::seconds(2))), avoid_epoch);
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
    call.req.set_pserver_epoch(OwnTarget().epoch);
    std::string header = call.req.SerializeAsString();
    auto result = (*conn)->Call(header, call.payload, call.reply, deadline.remaining());
    if (!result.ok()) {
      last = result.status();
      // A reply too large, a request past the limits, or the job's secret refused: retrying
      // would not help.
      if (last.code() == StatusCode::kDataLoss || last.code() == StatusCode::kInvalidArgument ||
          last.code() == StatusCode::kUnauthenticated) {
        return last;
      }
      if (chosen_.kind == TransportKind::kShm && transport_->wanted == TransportKind::kAuto &&
          last.code() == StatusCode::kPermissionDenied) {
        // It listens but this process may not reach it (a sandbox?): the next transport for this
        // registration (a replacement registers anew and is tried over shared memory again).
        spdlog::warn("pserver {}: {}; using the next transport", index_, last.message());
        shm_failed_epoch_ = OwnTarget().epoch;
        MutexLock lock(&conn_mu_);
        conn_.reset();
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
      if (result->payload_bytes != TotalSize(call.reply) &&
          !(reply.pull_deferred() && result->payload_bytes == 0)) {
        return Status::DataLoss("pserver " + std::to_string(index_) + " sent " +
                                std::to_string(result->payload_bytes) + " payload bytes for a pull of " +
                                std::to_string(TotalSize(call.reply)));
      }
      return reply;
    }
    last = s;
    switch (reply.reason()) {
      case wire::DataReply::STALE_EPOCH:
        avoid_epoch = OwnTarget().epoch;
        continue;
      case wire::DataReply::NOT_SERVING:
        std::this_thread::sleep_for(std::min(backoff.Next(), deadline.remaining()));
        continue;
      case wire::DataReply::NOT_INITIALIZED:
      case wire::DataReply::NOT_JOINED: {
        if (!recover) return s;
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
