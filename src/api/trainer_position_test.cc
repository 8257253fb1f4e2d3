// Unit tests of TrainerPosition: which steps a trainer reports its data position at, and what the
// position is once the records read after a step's push are taken back.
#include "api/trainer_position.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

TEST(TrainerPositionTest, DueOncePerMultipleFromTheFirstStepItPushedTo) {
  struct Case {
    int64_t every, first_step;
    std::vector<int64_t> steps;  // asked in this order
    std::vector<int64_t> due;    // the ones that were due
  } cases[] = {
      {0, 1, {0, 10, 20}, {}},                         // no consistent checkpoints
      {10, 1, {5, 10, 10, 15, 20, 30}, {10, 20, 30}},  // once each
      {10, 15, {10, 20}, {20}},                        // joined at 15: 10 is not its to report
      {10, 1, {20, 10}, {20}},                         // never back in time
      {1, 3, {1, 2, 3, 4}, {3, 4}},
  };
  for (const auto& c : cases) {
    TrainerPosition book(c.every);
    book.Joined(c.first_step);
    std::vector<int64_t> due;
    for (int64_t s : c.steps) {
      if (book.Due(s)) due.push_back(s);
    }
    EXPECT_EQ(due, c.due) << "every " << c.every << " first " << c.first_step;
  }
}

TEST(TrainerPositionTest, RecordsReadAfterTheStepsPushAreTakenOffTheNewestTasks) {
  auto held = [](std::vector<int64_t> offsets) {
    std::vector<ReaderHeldTask> h;
    for (size_t i = 0; i < offsets.size(); ++i)
      h.push_back({static_cast<int64_t>(i + 1), 1, 0, offsets[i], 100});
    return h;
  };
  auto offsets = [](const std::vector<ReaderHeldTask>& h) {
    std::vector<int64_t> o;
    for (const auto& t : h) o.push_back(t.offset);
    return o;
  };
  struct Case {
    const char* name;
    std::vector<int64_t> returned_at;  // the client's step at each record returned
    int64_t step;                      // the position asked for
    std::vector<int64_t> held, expected;
  } cases[] = {
      {"nothing read after the push", {4, 4}, 5, {10, 20}, {10, 20}},
      {"two read after step 5's push", {5, 5}, 5, {10, 20}, {10, 18}},
      {"more than the newest task holds", {5, 5, 5}, 5, {10, 2}, {9, 0}},
      {"the count restarts at a new step", {5, 5, 6}, 6, {10, 20}, {10, 19}},
      {"never below zero", {7, 7, 7, 7}, 7, {1, 1}, {0, 0}},
      {"no tasks held", {3}, 3, {}, {}},
  };
  for (const auto& c : cases) {
    TrainerPosition book(10);
    for (int64_t s : c.returned_at) book.RecordReturned(s);
    EXPECT_EQ(offsets(book.PositionAt(c.step, held(c.held))), c.expected) << c.name;
  }
}

}  // namespace
}  // namespace tessera::api
