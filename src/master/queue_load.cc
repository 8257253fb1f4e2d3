// The leading master's task queue, loaded or made (see queue_load.h).
#include "master/queue_load.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "master/events.h"
#include "master/master_service.h"

namespace tessera::master {
namespace {

// What a saved state belongs to; a master refuses to continue another data set's queue.
nlohmann::json Settings(const dataset::Manifest& m, const TaskQueueOptions& q) {
  return {{"dataset", m.name},
          {"chunks", q.chunks},
          {"chunks_per_task", q.chunks_per_task},
          {"min_tasks", q.min_tasks},
          {"min_task_records", q.min_task_records},
          {"timeout_ms", q.timeout_ms},
          {"max_failures", q.max_failures},
          {"passes", q.passes},
          {"seed", q.seed},
          {"follow", q.follow},
          {"created_ms", m.created_ms}};
}

}  // namespace

StatusOr<LeadQueue> LoadOrCreateQueue(StateLog& log, const std::string& job,
                                      const dataset::Manifest& manifest, TaskQueueOptions qo,
                                      int64_t revision) {
  TESSERA_ASSIGN_OR_RETURN(auto loaded, log.Load());
  std::unique_ptr<TaskQueue> queue;
  int64_t seq = 0;
  std::string settings = Settings(manifest, qo).dump();
  if (loaded.has_value()) {
    const LoadedState& st = *loaded;
    auto saved = nlohmann::json::parse(st.settings, nullptr, false);
    // A queue that follows its data set started with fewer chunks than it has now.
    const int64_t saved_chunks = saved.is_discarded() ? -1 : saved.value("chunks", int64_t{-1});
    const bool followed = !saved.is_discarded() && saved.value("follow", false);
    if (saved.is_discarded() || saved.value("dataset", "") != manifest.name ||
        (followed ? saved_chunks < 1 || saved_chunks > qo.chunks : saved_chunks != qo.chunks) ||
        saved.value("created_ms", int64_t{-1}) != manifest.created_ms) {
      return Status::FailedPrecondition("job '" + job + "' already has a task queue for another data set (" +
                                        st.settings +
                                        "); run another job or delete it with `tessera job delete`");
    }
    qo.chunks_per_task = saved.value("chunks_per_task", qo.chunks_per_task);
    // A queue saved before record-range tasks has whole-chunk tasks only.
    qo.min_tasks = saved.value("min_tasks", int64_t{0});
    qo.min_task_records = saved.value("min_task_records", int64_t{1});
    qo.timeout_ms = saved.value("timeout_ms", qo.timeout_ms);
    qo.max_failures = saved.value("max_failures", qo.max_failures);
    qo.passes = saved.value("passes", qo.passes);
    qo.seed = saved.value("seed", qo.seed);
    qo.follow = followed;
    if (followed) {
      qo.chunks = saved_chunks;
      qo.chunk_records.resize(static_cast<size_t>(saved_chunks));
      qo.split_min_records = 0;
    }
    settings = Settings(manifest, qo).dump();
    auto restored = TaskQueue::Restore(qo, st.snapshot);
    if (!restored.ok()) return restored.status();
    queue = std::make_unique<TaskQueue>(std::move(*restored));
    int64_t now = SteadyMillis();
    size_t events = 0;
    for (const auto& d : st.deltas) {
      TESSERA_ASSIGN_OR_RETURN(auto evs, DecodeDelta(d));
      for (const auto& e : evs) TESSERA_RETURN_IF_ERROR(Replay(*queue, e, now));
      events += evs.size();
    }
    queue->ResetDeadlines(now);
    seq = st.seq;
    spdlog::info("took over job {} at revision {}: pass {}/{}, {} events replayed", job, revision,
                 queue->pass() + 1, queue->passes(), events);
  } else {
    queue = std::make_unique<TaskQueue>(qo);
    TESSERA_RETURN_IF_ERROR(log.WriteBase(settings, queue->Snapshot(), 0));
    if (queue->tasks() > static_cast<int64_t>((qo.chunks + qo.chunks_per_task - 1) / qo.chunks_per_task)) {
      spdlog::info(
          "leading job {}: {} tasks from {} ({} records in {} chunks, cut into record ranges of at least {} "
          "so every trainer has work; {} passes)",
          job, queue->tasks(), manifest.name, manifest.records, qo.chunks, qo.min_task_records, qo.passes);
    } else {
      spdlog::info("leading job {}: {} tasks of {} chunks from {} ({} passes)", job, queue->tasks(),
                   qo.chunks_per_task, manifest.name, qo.passes);
    }
  }
  return LeadQueue{std::move(queue), qo, settings, seq};
}

}  // namespace tessera::master
