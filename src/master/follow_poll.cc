// FollowPoll (see follow_poll.h).
#include "master/follow_poll.h"

#include <spdlog/spdlog.h>

#include "coord/keys.h"
#include "dataset/dataset.h"

namespace tessera::master {

void FollowPoll::Poll() {
  if (stopped_) return;
  auto problem = [&](const Status& s) {
    if (s.ToString() != last_problem_) spdlog::warn("following data set {}: {}", dir_, s.message());
    last_problem_ = s.ToString();
  };
  // The stop key first, then the manifest: chunks appended before the key was written are
  // still taken.
  auto stop = etcd_->Get(keys::FollowStop(job_));
  const bool stop_seen = stop.ok() && !stop->kvs.empty();
  if (auto m = dataset::LoadManifest(dir_); !m.ok()) {
    problem(m.status());
  } else if (auto added = service_->FollowChunks(*m); !added.ok()) {
    problem(added.status());
  } else if (*added > 0) {
    int64_t records = 0;
    for (size_t c = m->chunks.size() - static_cast<size_t>(*added); c < m->chunks.size(); ++c)
      records += m->chunks[c].records;
    spdlog::info("following {}: {} new chunk{} ({} records) to train on", m->name, *added,
                 *added == 1 ? "" : "s", records);
  }
  if (stop_seen) {
    if (Status s = service_->StopFollowing(); s.ok()) {
      stopped_ = true;
    } else {
      problem(s);
    }
  }
}

}  // namespace tessera::master
