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

}  // namespace tessera::master
