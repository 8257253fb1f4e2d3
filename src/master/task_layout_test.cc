// Unit tests of the task layout: whole chunks when there are enough, record ranges otherwise,
// every record in exactly one task, no range under a batch, and every trainer with work whenever
// there are records for trainers x batch size.
#include "master/task_layout.h"

#include <gtest/gtest.h>

namespace tessera::master {
namespace {

// Every record of every chunk is in exactly one span.
void ExpectCoversEachRecordOnce(const TaskLayoutOptions& o, const std::vector<TaskSpan>& spans) {
  std::vector<std::vector<int>> seen;
  for (int64_t r : o.chunk_records) seen.emplace_back(static_cast<size_t>(r), 0);
  for (const auto& s : spans) {
    for (int64_t c = s.first_chunk; c < s.first_chunk + s.chunks; ++c) {
      const int64_t from = s.records > 0 ? s.first_record : 0;
      const int64_t to = s.records > 0 ? s.first_record + s.records : o.chunk_records[static_cast<size_t>(c)];
      ASSERT_LE(to, o.chunk_records[static_cast<size_t>(c)]);
      for (int64_t i = from; i < to; ++i) ++seen[static_cast<size_t>(c)][static_cast<size_t>(i)];
    }
  }
  for (size_t c = 0; c < seen.size(); ++c) {
    for (size_t i = 0; i < seen[c].size(); ++i) ASSERT_EQ(seen[c][i], 1) << "chunk " << c << " record " << i;
  }
}

TEST(TaskLayoutTest, EnoughChunksKeepWholeChunkTasks) {
  TaskLayoutOptions o{{100, 100, 100, 100, 100}, 2, 3, 10};
  auto spans = LayoutTasks(o);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0], (TaskSpan{0, 2, 0, 0}));
  EXPECT_EQ(spans[2], (TaskSpan{4, 1, 0, 0}));
  ExpectCoversEachRecordOnce(o, spans);
  o.min_tasks = 0;  // never cut
  EXPECT_EQ(LayoutTasks(o).size(), 3u);
}

TEST(TaskLayoutTest, AThreeHundredRecordDataSetGivesThreeTrainersWork) {
  // One chunk of 300 records, 3 trainers (min_tasks 4 x 3), batch 64: four ranges of 75.
  TaskLayoutOptions o{{300}, 1, 12, 64};
  auto spans = LayoutTasks(o);
  ASSERT_EQ(spans.size(), 4u);
  for (const auto& s : spans) EXPECT_EQ(s.records, 75);
  ExpectCoversEachRecordOnce(o, spans);
}

TEST(TaskLayoutTest, EveryTrainerHasWorkWheneverThereAreTrainersTimesBatchRecords) {
  for (int trainers = 1; trainers <= 8; ++trainers) {
    for (int batch : {1, 7, 64}) {
      for (int chunks : {1, 2, 3}) {
        const int64_t total = static_cast<int64_t>(trainers) * batch;
        // Uneven chunks that add up to exactly trainers x batch.
        std::vector<int64_t> recs(static_cast<size_t>(chunks), total / chunks);
        recs[0] += total % chunks;
        TaskLayoutOptions o{recs, 1, 4 * trainers, batch};
        auto spans = LayoutTasks(o);
        EXPECT_GE(static_cast<int64_t>(spans.size()), trainers)
            << trainers << " trainers, batch " << batch << ", " << chunks << " chunks";
        ExpectCoversEachRecordOnce(o, spans);
      }
    }
  }
}

TEST(TaskLayoutTest, NoRangeIsSmallerThanABatchWhereTheChunksAllowIt) {
  TaskLayoutOptions o{{1000, 50, 400}, 1, 100, 64};
  auto spans = LayoutTasks(o);
  ExpectCoversEachRecordOnce(o, spans);
  for (const auto& s : spans) {
    if (s.records > 0) {
      EXPECT_GE(s.records, 64);
    }
  }
  // The 50-record chunk stays whole; the others are cut in proportion (1000/64 = 15, 400/64 = 6).
  int64_t from_first = 0;
  for (const auto& s : spans) from_first += s.first_chunk == 0;
  EXPECT_EQ(from_first, 15);
}

TEST(TaskLayoutTest, TheSameSettingsGiveTheSameLayout) {
  TaskLayoutOptions o{{17, 301, 5, 99, 250}, 2, 40, 8};
  EXPECT_EQ(LayoutTasks(o), LayoutTasks(o));
  ExpectCoversEachRecordOnce(o, LayoutTasks(o));
  EXPECT_TRUE(LayoutTasks({{}, 1, 10, 1}).empty());
}

TEST(TaskLayoutTest, TheMastersChoiceOfChunksPerTaskHoldsAboutFourMiBYetKeepsMinTasks) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  // Fashion-MNIST's 47 chunks of 1 MiB: 4 a task (12 tasks), with 8 or 16 tasks wanted...
  const std::vector<uint64_t> fm(47, kMiB);
  EXPECT_EQ(AutoChunksPerTask(fm, 8), 4);
  EXPECT_EQ(LayoutTasks({std::vector<int64_t>(47, 1250), AutoChunksPerTask(fm, 8), 8, 64}).size(), 12u);
  // ...but 2 when 16 trainers x 4 tasks would go short of tasks, and 1 for 40 trainers.
  EXPECT_EQ(AutoChunksPerTask(fm, 16), 2);
  EXPECT_EQ(AutoChunksPerTask(fm, 160), 1);
  // Chunks of 64 KiB: 64 a task when there are chunks enough, fewer when not.
  EXPECT_EQ(AutoChunksPerTask(std::vector<uint64_t>(10000, 64 << 10), 8), 64);
  EXPECT_EQ(AutoChunksPerTask(std::vector<uint64_t>(100, 64 << 10), 8), 12);
  // Chunks bigger than the target, few chunks, no chunks, no sizes: one a task.
  EXPECT_EQ(AutoChunksPerTask(std::vector<uint64_t>(100, 16 * kMiB), 8), 1);
  EXPECT_EQ(AutoChunksPerTask(std::vector<uint64_t>(3, 1000), 8), 1);
  EXPECT_EQ(AutoChunksPerTask({}, 8), 1);
  // min_tasks 0 (never cut chunks) still leaves at least one task: the size alone decides.
  EXPECT_EQ(AutoChunksPerTask(fm, 0), 4);
  // Uneven chunks go by their mean; every pass still has min_tasks tasks.
  std::vector<uint64_t> uneven;
  for (int i = 0; i < 40; ++i) uneven.push_back(i % 2 ? 2 * kMiB : kMiB / 2);
  const int per = AutoChunksPerTask(uneven, 8);
  EXPECT_EQ(per, 3);
  EXPECT_GE((40 + per - 1) / per, 8);
}

}  // namespace
}  // namespace tessera::master
