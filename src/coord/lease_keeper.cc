// LeaseKeeper implementation (see lease_keeper.h).
#include "coord/lease_keeper.h"

#include <spdlog/spdlog.h>

#include <deque>

#include "common/backoff.h"
#include "coord/etcd_internal.h"

namespace tessera {

const char* LeaseStateName(LeaseState s) {
  switch (s) {
    case LeaseState::kAlive:
      return "alive";
    case LeaseState::kUnconfirmed:
      return "unconfirmed";
    case LeaseState::kLost:
      return "lost";
  }
  return "?";
}

struct LeaseKeeper::Stream {
  grpc::ClientContext ctx;
  std::unique_ptr<
      grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest, etcdserverpb::LeaseKeepAliveResponse>>
      rw;
  std::deque<TimePoint> in_flight;  // send times of unanswered keep-alives, oldest first; under mu_
  bool broken = false;              // the reader saw the end of the stream; under mu_
  bool answered = false;            // at least one keep-alive was answered; under mu_
};

StatusOr<std::unique_ptr<LeaseKeeper>> LeaseKeeper::Start(etcd::EtcdClient* etcd, LeaseKeeperOptions options,
                                                          Listener listener) {
  TimePoint sent = Now();
  TESSERA_ASSIGN_OR_RETURN(etcd::LeaseGrant grant, etcd->GrantLease(options.ttl_seconds));
  auto interval = options.keepalive_interval;
  if (interval.count() <= 0) {
    interval = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(grant.ttl_seconds * 1000 / 3),
                                                   std::chrono::milliseconds(500));
  }
  return std::unique_ptr<LeaseKeeper>(
      new LeaseKeeper(etcd, grant.id, grant.ttl_seconds, sent, interval, std::move(listener)));
}

LeaseKeeper::LeaseKeeper(etcd::EtcdClient* etcd, int64_t id, int64_t ttl, TimePoint granted_sent_at,
                         std::chrono::milliseconds interval, Listener listener)
    : etcd_(etcd),
      id_(id),
      ttl_seconds_(ttl),
      interval_(interval),
      listener_(std::move(listener)),
      tracker_(granted_sent_at, std::chrono::seconds(ttl)) {
  thread_ = std::thread([this] { Run(); });
}

LeaseKeeper::~LeaseKeeper() { Stop(); }

LeaseState LeaseKeeper::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tracker_.StateAt(Now());
}

LeaseState LeaseKeeper::WaitWhileAlive(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return reported_ != LeaseState::kAlive; });
  return tracker_.StateAt(Now());
}

void LeaseKeeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (stream_) stream_->ctx.TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

Status LeaseKeeper::Revoke() {
  Stop();
  etcd::CallOptions call;
  call.retry_timeout = std::chrono::seconds(5);
  Status s = etcd_->RevokeLease(id_, call);
  {
    std::lock_guard<std::mutex> lock(mu_);
    tracker_.OnLost();
    reported_ = LeaseState::kLost;
  }
  cv_.notify_all();
  return s;
}

void LeaseKeeper::Evaluate(TimePoint now) {
  LeaseState state;
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state = tracker_.StateAt(now);
    if (state != reported_) {
      reported_ = state;
      changed = true;
    }
  }
  if (!changed) return;
  cv_.notify_all();
  if (state == LeaseState::kAlive) {
    spdlog::info("lease {:x} confirmed alive again", id_);
  } else {
    spdlog::warn("lease {:x} is {}", id_, LeaseStateName(state));
  }
  if (listener_) listener_(state);
}

void LeaseKeeper::NoteUnreachable(const std::string& endpoint, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (unreachable_since_) return;
    unreachable_since_ = Now();
  }
  spdlog::warn("etcd is unreachable ({}: {}); retrying. Lease {:x} lasts {} s without a renewal", endpoint, why,
               id_, ttl_seconds_);
}

void LeaseKeeper::NoteReachable() {
  std::optional<TimePoint> since;
  {
    std::lock_guard<std::mutex> lock(mu_);
    since.swap(unreachable_since_);
  }
  if (since) {
    spdlog::info("etcd answers again after {:.1f} s",
                 std::chrono::duration<double>(Now() - *since).count());
  }
}

std::unique_lock<std::mutex> LeaseKeeper::JudgeThenWait(TimePoint planned,
                                                        const std::function<bool()>& wake) {
  const TimePoint judged = Now();
  Evaluate(judged);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, tracker_.WakeAt(planned, judged), wake);
  return lock;
}

void LeaseKeeper::SendKeepAlives(Stream& stream) {
  TimePoint next_send = Now();
  while (!stop_) {
    const TimePoint now = Now();
    if (now >= next_send) {
      etcdserverpb::LeaseKeepAliveRequest req;
      req.set_id(id_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        stream.in_flight.push_back(now);
      }
      if (!stream.rw->Write(req)) return;
      next_send = now + interval_;
    }
    auto lock = JudgeThenWait(next_send, [&] { return stop_.load() || stream.broken; });
    if (stream.broken) return;
    if (tracker_.StateAt(Now()) == LeaseState::kLost) {
      stop_ = true;  // final: nothing left to keep alive
      return;
    }
  }
}

// One keep-alive stream's life after another: open it on the current endpoint, read its answers
// on a thread of its own while SendKeepAlives sends, then fail over and back off.
void LeaseKeeper::Run() {
  auto& impl = *etcd_->impl();
  Backoff backoff({std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 2.0, 0.2});
  while (!stop_ && !impl.shutdown) {
    size_t index = 0;
    etcd::Endpoint& ep = impl.Current(&index);
    auto stream = std::make_shared<Stream>();
    // Connect, but wake in time to report the lease unconfirmed when it may have expired.
    std::chrono::milliseconds connect_wait(500);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto until_expiry = std::chrono::duration_cast<std::chrono::milliseconds>(tracker_.expiry() - Now());
      if (until_expiry > std::chrono::milliseconds(0)) connect_wait = std::min(connect_wait, until_expiry);
    }
    if (!impl.EnsureConnected(ep, connect_wait) || !impl.PrepareContext(&stream->ctx, ep).ok()) {
      NoteUnreachable(ep.address, "cannot connect");
      impl.Rotate(index);
    } else {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) break;
        stream_ = stream;
      }
      stream->rw = ep.lease->LeaseKeepAlive(&stream->ctx);
      // The reader thread matches answers to send times and feeds the tracker.
      std::thread reader([this, stream] {
        etcdserverpb::LeaseKeepAliveResponse resp;
        while (stream->rw->Read(&resp)) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (stream->in_flight.empty()) continue;
            TimePoint sent = stream->in_flight.front();
            stream->in_flight.pop_front();
            tracker_.OnKeepAliveAnswered(sent, std::chrono::seconds(resp.ttl()));
            stream->answered = true;
            ++renewals_;
          }
          NoteReachable();
          Evaluate(Now());
        }
        std::lock_guard<std::mutex> lock(mu_);
        stream->broken = true;
        cv_.notify_all();
      });
      SendKeepAlives(*stream);
      stream->ctx.TryCancel();
      reader.join();
      grpc::Status fs = stream->rw->Finish();
      {
        std::lock_guard<std::mutex> lock(mu_);
        stream_.reset();
      }
      Evaluate(Now());
      if (stop_) break;
      if (stream->answered) backoff.Reset();
      if (fs.error_code() == grpc::StatusCode::UNAVAILABLE) NoteUnreachable(ep.address, fs.error_message());
      spdlog::debug("lease {:x} keep-alive stream via {} ended: {}", id_, ep.address, fs.error_message());
      impl.Rotate(index);
    }
    // Wait before reconnecting, but wake to report the lease unconfirmed on time.
    TimePoint resume = Now() + backoff.Next();
    while (!stop_ && !impl.shutdown && Now() < resume) JudgeThenWait(resume, [&] { return stop_.load(); });
  }
  Evaluate(Now());
}

}  // namespace tessera
