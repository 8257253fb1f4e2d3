// How a pass over a data set is cut into tasks. Normally a task is `chunks_per_task` consecutive
// chunks. A small data set has few chunks (300 records fit in one), and whole-chunk tasks would
// leave most trainers idle; so when that gives fewer than `min_tasks` tasks, the chunks are cut
// into record ranges instead: as many tasks as `min_tasks` asks for but no more than the records
// make batches of `min_task_records`, spread over the chunks in proportion to their records, each
// range a batch or more where the chunk allows (smaller only where chunks too small for a batch
// per range must still give each trainer a task). With min_tasks >= the trainers and
// min_task_records = the batch size, every trainer gets work whenever there are records for
// trainers x batch size.
// Pure and deterministic: every master computes the same layout from the same settings.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::master {

struct TaskSpan {
  int64_t first_chunk = 0;
  int64_t chunks = 1;
  // A record range of the one chunk (`chunks` is 1): records [first_record, first_record +
  // records). records 0: every record of the chunks.
  int64_t first_record = 0;
  int64_t records = 0;
  bool operator==(const TaskSpan&) const = default;
};

struct TaskLayoutOptions {
  std::vector<int64_t> chunk_records;  // records of each chunk, in order
  int chunks_per_task = 1;
  int64_t min_tasks = 0;         // 0: never cut chunks
  int64_t min_task_records = 1;  // the smallest range worth a task (e.g. a batch)
};

std::vector<TaskSpan> LayoutTasks(const TaskLayoutOptions& o);

// The records a task holds when the master chooses its size: about this much before compression.
inline constexpr uint64_t kAutoTaskRawBytes = uint64_t{4} << 20;

// Chunks per task when the job leaves the choice to the master (--chunks-per-task 0): as many
// consecutive chunks as hold about `target_raw_bytes` of records, yet never so many that a pass
// has fewer than `min_tasks` tasks; at least 1. Handing out a task costs the same whatever its
// size (a dispatch and a finish written to etcd, two calls, a read ahead on the trainer), so on
// 1 MiB chunks a fast model paid it every ~25 ms. A chunk without its raw size counts its
// stored bytes.
int AutoChunksPerTask(const std::vector<uint64_t>& chunk_raw_bytes, int64_t min_tasks,
                      uint64_t target_raw_bytes = kAutoTaskRawBytes);

}  // namespace tessera::master
