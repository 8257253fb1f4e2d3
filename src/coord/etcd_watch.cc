// Watcher implementation (see etcd_watch.h).
#include "coord/etcd_watch.h"

#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/logging.h"
#include "coord/etcd_internal.h"

namespace tessera::etcd {

struct Watcher::Stream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>> rw;
  std::mutex write_mu;  // one writer at a time
};

Watcher::Watcher(EtcdClient* client, std::string key, WatchOptions options,
                 std::function<void(const WatchUpdate&)> callback)
    : client_(client), key_(std::move(key)), options_(options), callback_(std::move(callback)) {
  next_revision_ = options_.start_revision;
  thread_ = std::thread([this] { Run(); });
}

Watcher::~Watcher() { Cancel(); }

void Watcher::Cancel() {
  TESSERA_CHECK(!thread_.joinable() || std::this_thread::get_id() != thread_.get_id());
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (stream_) stream_->ctx.TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Watcher::RequestProgress() {
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stream_;
  }
  if (!s || !connected_) return Status::Unavailable("watch on " + key_ + " is not connected");
  etcdserverpb::WatchRequest req;
  req.mutable_progress_request();
  std::lock_guard<std::mutex> lock(s->write_mu);
  if (!s->rw->Write(req)) return Status::Unavailable("watch on " + key_ + ": stream broke");
  return Status::OK();
}

// Longer than our usual (about 90 lines), for a reason: one watch stream's life (open from the
// last revision seen, read events, resume after a compaction or an endpoint's failure, back off)
// reads best whole, and its state lives on the loop's stack between retries.
void Watcher::Run() {
  EtcdClient::Impl& impl = *client_->impl();
  Backoff backoff({std::chrono::milliseconds(100), std::chrono::milliseconds(2000), 2.0, 0.2});
  while (!cancelled_ && !impl.shutdown) {
    size_t index = 0;
    Endpoint& ep = impl.Current(&index);
    auto stream = std::make_shared<Stream>();
    Status prep = impl.EnsureConnected(ep, std::chrono::milliseconds(1000))
                      ? impl.PrepareContext(&stream->ctx, ep)
                      : Status::Unavailable("cannot connect to " + ep.address);
    bool ended = false;
    bool got_response = false;
    if (prep.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (cancelled_) break;
        stream_ = stream;
      }
      stream->rw = ep.watch->Watch(&stream->ctx);
      etcdserverpb::WatchRequest req;
      auto* create = req.mutable_create_request();
      create->set_key(key_);
      if (options_.prefix) create->set_range_end(PrefixEnd(key_));
      create->set_start_revision(next_revision_.load());
      create->set_progress_notify(options_.progress_notify);
      create->set_prev_kv(options_.prev_kv);
      bool wrote;
      {
        std::lock_guard<std::mutex> lock(stream->write_mu);
        wrote = stream->rw->Write(req);
      }
      etcdserverpb::WatchResponse resp;
      while (wrote && stream->rw->Read(&resp)) {
        got_response = true;
        if (resp.canceled()) {
          if (resp.compact_revision() > 0) {
            WatchUpdate u;
            u.revision = resp.header().revision();
            u.compact_revision = resp.compact_revision();
            u.status = Status::OutOfRange(
                "watch on " + key_ + ": revision " + std::to_string(next_revision_.load()) +
                " was compacted (oldest is " + std::to_string(resp.compact_revision()) + ")");
            callback_(u);
            ended = true;
          } else {
            spdlog::warn("etcd watch on {} cancelled by the server: {}", key_, resp.cancel_reason());
          }
          break;
        }
        if (resp.created()) {
          connected_ = true;
          ++connects_;
          backoff.Reset();
          if (next_revision_.load() == 0) next_revision_ = resp.header().revision() + 1;
          continue;
        }
        WatchUpdate u;
        u.revision = resp.header().revision();
        for (const auto& ev : resp.events()) {
          WatchEvent e;
          e.type = ev.type() == mvccpb::Event::DELETE ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
          e.kv = FromProto(ev.kv());
          if (ev.has_prev_kv()) e.prev_kv = FromProto(ev.prev_kv());
          u.events.push_back(std::move(e));
        }
        if (!u.events.empty()) {
          next_revision_ = u.events.back().kv.mod_revision + 1;
        } else if (u.revision + 1 > next_revision_.load()) {
          next_revision_ = u.revision + 1;  // progress: nothing up to u.revision is pending
        }
        if (cancelled_) break;
        callback_(u);
      }
      connected_ = false;
      stream->ctx.TryCancel();
      grpc::Status fs = stream->rw->Finish();
      {
        std::lock_guard<std::mutex> lock(mu_);
        stream_.reset();
      }
      if (ended || cancelled_) break;
      if (!fs.ok() && fs.error_code() != grpc::StatusCode::CANCELLED) {
        spdlog::debug("etcd watch on {} via {} broke: {}", key_, ep.address, fs.error_message());
      }
    }
    if (!got_response) impl.Rotate(index);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, backoff.Next(), [&] { return cancelled_.load() || impl.shutdown.load(); });
  }
  connected_ = false;
}

}  // namespace tessera::etcd
