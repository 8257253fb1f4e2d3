// Task layout (see task_layout.h).
#include "master/task_layout.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace tessera::master {

std::vector<TaskSpan> LayoutTasks(const TaskLayoutOptions& o) {
  const int64_t chunks = static_cast<int64_t>(o.chunk_records.size());
  const int64_t per = std::max(o.chunks_per_task, 1);
  std::vector<TaskSpan> whole;
  for (int64_t c = 0; c < chunks; c += per) whole.push_back({c, std::min(per, chunks - c), 0, 0});
  const int64_t total = std::accumulate(o.chunk_records.begin(), o.chunk_records.end(), int64_t{0});
  const int64_t min_records = std::max<int64_t>(o.min_task_records, 1);
  // As many tasks as asked for, but none smaller than min_records (unless a chunk is).
  const int64_t wanted = std::min(o.min_tasks, total / min_records);
  if (static_cast<int64_t>(whole.size()) >= wanted) return whole;
  // Ranges per chunk in proportion to its records, at least one, none below min_records. The
  // shares are rounded down, then the leftovers go to the chunks with the largest remainders
  // (ties to the earlier chunk), so the total is exact and the result deterministic.
  std::vector<int64_t> pieces(static_cast<size_t>(chunks), 1), cap(static_cast<size_t>(chunks), 1);
  std::vector<std::pair<int64_t, int64_t>> remainders;  // (remainder, chunk)
  int64_t given = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r = o.chunk_records[static_cast<size_t>(c)];
    cap[c] = std::max<int64_t>(1, r / min_records);
    const int64_t share = total > 0 ? wanted * r : 0;
    pieces[c] = std::clamp<int64_t>(total > 0 ? share / total : 1, 1, cap[c]);
    given += pieces[c];
    if (total > 0) remainders.emplace_back(share % total, c);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < wanted && i < remainders.size(); ++i) {
    const int64_t c = remainders[i].second;
    if (pieces[c] < cap[c]) {
      ++pieces[c];
      ++given;
    }
  }
  // Chunks too small for a batch per range can still give the trainers a task each: cut further
  // where the ranges are largest (down to one record).
  while (given < wanted) {
    int64_t best = -1;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t r = o.chunk_records[static_cast<size_t>(c)];
      if (pieces[c] >= r) continue;
      // Compare r / pieces without division: r_c * pieces_best > r_best * pieces_c.
      if (best < 0 || r * pieces[best] > o.chunk_records[static_cast<size_t>(best)] * pieces[c]) best = c;
    }
    if (best < 0) break;
    ++pieces[best];
    ++given;
  }
  std::vector<TaskSpan> out;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r = o.chunk_records[static_cast<size_t>(c)];
    if (pieces[c] <= 1) {
      out.push_back({c, 1, 0, 0});
      continue;
    }
    // Nearly equal ranges: the first (r % pieces) get one record more.
    int64_t at = 0;
    for (int64_t p = 0; p < pieces[c]; ++p) {
      const int64_t n = r / pieces[c] + (p < r % pieces[c] ? 1 : 0);
      out.push_back({c, 1, at, n});
      at += n;
    }
  }
  return out;
}

int AutoChunksPerTask(const std::vector<uint64_t>& chunk_raw_bytes, int64_t min_tasks,
                      uint64_t target_raw_bytes) {
  const auto chunks = static_cast<int64_t>(chunk_raw_bytes.size());
  if (chunks == 0) return 1;
  const uint64_t total = std::accumulate(chunk_raw_bytes.begin(), chunk_raw_bytes.end(), uint64_t{0});
  const uint64_t mean = std::max<uint64_t>(total / static_cast<uint64_t>(chunks), 1);
  const int64_t by_size = static_cast<int64_t>(std::max<uint64_t>(target_raw_bytes / mean, 1));
  // ceil(chunks / per) >= min_tasks whenever per <= chunks / min_tasks.
  const int64_t by_count = std::max<int64_t>(chunks / std::max<int64_t>(min_tasks, 1), 1);
  return static_cast<int>(std::clamp<int64_t>(std::min(by_size, by_count), 1, INT32_MAX));
}

}  // namespace tessera::master
