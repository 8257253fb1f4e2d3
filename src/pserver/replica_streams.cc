// ShardOutbox and its streams (see replica_streams.h).
#include "pserver/replica_streams.h"

#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "transport/transport_factory.h"

namespace tessera {

struct ShardOutbox::Stream {
  int host = -1;
  int64_t epoch = 0;
  TransportKind kind = TransportKind::kTcp;
  std::string endpoint;
  std::shared_ptr<ClientConnection> conn;                   // replaced after a broken connection (under mu_)
  std::deque<std::shared_ptr<const ReplicaMessage>> queue;  // front: being sent
  int64_t acked = 0;                                        // the newest record the backup acknowledged
  int64_t snapshot_seq = -1;                                // the snapshot's record; synced once acked >= it
  bool synced = false;
  bool resync = false;  // the backup reported a gap: start again from a snapshot
  bool stop = false;
  std::condition_variable cv;
  std::thread thread;
};

ShardOutbox::ShardOutbox(PserverService* service, TransportOptions transport)
    : service_(service), transport_(std::move(transport)) {}

ShardOutbox::~ShardOutbox() { Close(); }

bool ShardOutbox::Publish(std::shared_ptr<const ReplicaMessage> m) {
  std::lock_guard<std::mutex> lock(mu_);
  if (streams_.empty()) return false;
  for (auto& [h, s] : streams_) {
    s->queue.push_back(m);
    s->cv.notify_all();
  }
  return true;
}

Status ShardOutbox::AddStream(int host, int64_t epoch, TransportKind kind, const std::string& endpoint) {
  auto s = std::make_shared<Stream>();
  s->host = host;
  s->epoch = epoch;
  s->kind = kind;
  s->endpoint = endpoint;
  s->conn = NewClientConnection(kind, endpoint, transport_);
  // Under the service's lock: the snapshot, and every record after it, reach the new stream.
  Status st = service_->AttachBackup([&](std::shared_ptr<const ReplicaMessage> snap) {
    std::lock_guard<std::mutex> lock(mu_);
    s->snapshot_seq = snap->seq;
    s->acked = 0;
    s->queue.push_back(std::move(snap));
    streams_[host] = s;
  });
  if (!st.ok()) return st;
  s->thread = std::thread([this, raw = s.get()] { Run(raw); });
  return Status::OK();
}

void ShardOutbox::RemoveStream(int host) {
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(host);
    if (it == streams_.end()) return;
    s = it->second;
    streams_.erase(it);
    s->stop = true;
    s->cv.notify_all();
    s->conn->Abort();
  }
  if (s->thread.joinable()) s->thread.join();
  ReportCommitted();
}

bool ShardOutbox::HasStream(int host) const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.count(host) > 0;
}

int64_t ShardOutbox::EpochOf(int host) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(host);
  return it == streams_.end() ? 0 : it->second->epoch;
}

int64_t ShardOutbox::Acked(int host) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(host);
  return it == streams_.end() ? -1 : it->second->acked;
}

bool ShardOutbox::Synced(int host) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(host);
  return it != streams_.end() && it->second->synced;
}

std::vector<int> ShardOutbox::hosts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (const auto& [h, s] : streams_) out.push_back(h);
  return out;
}

void ShardOutbox::Close() {
  for (int h : hosts()) RemoveStream(h);
}

void ShardOutbox::ReportCommitted() {
  int64_t committed = INT64_MAX;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [h, s] : streams_) committed = std::min(committed, s->acked);
  }
  service_->Committed(committed == INT64_MAX ? service_->published() : committed);
}

void ShardOutbox::Run(Stream* s) {
  Backoff backoff({std::chrono::milliseconds(20), std::chrono::milliseconds(500), 2.0, 0.2});
  Status last;
  while (true) {
    std::shared_ptr<const ReplicaMessage> m;
    std::shared_ptr<ClientConnection> conn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      s->cv.wait(lock, [&] { return s->stop || s->resync || !s->queue.empty(); });
      if (s->stop) return;
      if (!s->resync) m = s->queue.front();
      conn = s->conn;
    }
    if (!m) {
      // The backup lost track (a gap): replace what is queued with a fresh snapshot.
      Status st = service_->AttachBackup([&](std::shared_ptr<const ReplicaMessage> snap) {
        std::lock_guard<std::mutex> lock(mu_);
        s->queue.clear();
        s->snapshot_seq = snap->seq;
        s->synced = false;
        s->resync = false;
        s->queue.push_back(std::move(snap));
      });
      if (!st.ok()) {
        spdlog::warn("replica stream to host {}: cannot take a snapshot: {}", s->host, st.ToString());
        std::unique_lock<std::mutex> lock(mu_);
        s->cv.wait_for(lock, backoff.Next(), [&] { return s->stop; });
      }
      continue;
    }
    ConstBuffer body{m->payload.data(), m->payload.size()};
    auto r = conn->Call(m->header, m->payload.empty() ? std::span<const ConstBuffer>{} : std::span(&body, 1),
                        {}, std::chrono::seconds(30));
    Status st = r.status();
    wire::DataReply reply;
    if (st.ok() && !reply.ParseFromArray(r->header.data(), static_cast<int>(r->header.size())))
      st = Status::DataLoss("malformed reply header");
    if (st.ok() && reply.code() != 0) st = Status(static_cast<StatusCode>(reply.code()), reply.message());
    if (st.ok()) {
      backoff.Reset();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!s->queue.empty() && s->queue.front() == m) s->queue.pop_front();
        s->acked = m->seq;
        if (!s->synced && m->seq >= s->snapshot_seq) {
          s->synced = true;
          spdlog::info("replica stream to host {}: the backup holds the shard (record {})", s->host, m->seq);
        }
      }
      ReportCommitted();
      continue;
    }
    if (st.code() != last.code() || st.message() != last.message()) {
      spdlog::warn("replica stream to host {}: {} (retrying)", s->host, st.ToString());
      last = st;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (s->stop) return;
    if (st.code() == StatusCode::kOutOfRange) s->resync = true;
    if (st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kDeadlineExceeded)
      s->conn = NewClientConnection(s->kind, s->endpoint, transport_);
    s->cv.wait_for(lock, backoff.Next(), [&] { return s->stop; });
  }
}

}  // namespace tessera
