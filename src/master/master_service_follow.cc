// MasterService: following a growing data set (see master_service.h and task_queue.h).
#include <spdlog/spdlog.h>

#include "master/master_service.h"

namespace tessera::master {
namespace {

bool SameChunk(const recordio::ChunkInfo& a, const recordio::ChunkInfo& b) {
  return a.part == b.part && a.offset == b.offset && a.records == b.records && a.bytes == b.bytes &&
         a.crc == b.crc;
}

}  // namespace

StatusOr<int64_t> MasterService::FollowChunks(const dataset::Manifest& now) {
  uint64_t ticket = 0;
  int64_t added = 0;
  {
    MutexLock lock(&mu_);
    if (!active_ || !queue_ || !queue_->following()) return int64_t{0};
    const int64_t have = queue_->chunks();
    if (now.name != manifest_.name || now.created_ms != manifest_.created_ms ||
        static_cast<int64_t>(now.chunks.size()) < have) {
      return Status::FailedPrecondition("data set '" + manifest_.name +
                                        "' was replaced, not appended to: the job follows no more of it");
    }
    for (int64_t c = 0; c < have && c < static_cast<int64_t>(chunks_.size()); ++c) {
      if (!SameChunk(now.chunks[c], chunks_[c])) {
        return Status::FailedPrecondition("chunk " + std::to_string(c) + " of data set '" + manifest_.name +
                                          "' changed: the job follows no more of it");
      }
    }
    if (static_cast<int64_t>(now.chunks.size()) == have) return int64_t{0};
    Event e{Event::Type::kAddChunks};
    for (size_t c = static_cast<size_t>(have); c < now.chunks.size(); ++c)
      e.chunk_records.push_back(now.chunks[c].records);
    TESSERA_RETURN_IF_ERROR(queue_->AddChunks(e.chunk_records));
    chunks_.assign(now.chunks.begin(), now.chunks.end());
    added = static_cast<int64_t>(e.chunk_records.size());
    ticket = Log(e);
  }
  if (auto d = Durable(ticket); !d.ok()) return Status::Unavailable(d.error_message());
  return added;
}

Status MasterService::SetChunks(std::vector<recordio::ChunkInfo> chunks, int64_t queue_chunks) {
  if (static_cast<int64_t>(chunks.size()) < queue_chunks) {
    return Status::FailedPrecondition("data set '" + manifest_.name + "' has " +
                                      std::to_string(chunks.size()) + " chunks, fewer than the " +
                                      std::to_string(queue_chunks) +
                                      " the job's task queue knows: it was replaced, not appended to");
  }
  MutexLock lock(&mu_);
  chunks_ = std::move(chunks);
  return Status::OK();
}

Status MasterService::StopFollowing() {
  uint64_t ticket = 0;
  {
    MutexLock lock(&mu_);
    if (!active_ || !queue_ || !queue_->following()) return Status::OK();
    queue_->StopFollowing();
    ticket = Log(Event{Event::Type::kStopFollowing});
    spdlog::info("no more data for {}: the job ends when its {} tasks are done", manifest_.name,
                 queue_->tasks());
  }
  if (auto d = Durable(ticket); !d.ok()) return Status::Unavailable(d.error_message());
  return Status::OK();
}

}  // namespace tessera::master
