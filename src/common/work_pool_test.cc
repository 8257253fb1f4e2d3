// WorkPool: every part of every run runs once, with any number of threads.
#include "common/work_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera {
namespace {

TEST(WorkPoolTest, RunsEveryPartOnceAcrossManyRuns) {
  for (int threads : {1, 2, 4}) {
    WorkPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int run = 0; run < 500; ++run) {
      const int parts = 1 + run % 9;
      std::vector<int> ran(parts, 0);
      pool.Run(parts, [&](int p) { ++ran[p]; });
      for (int p = 0; p < parts; ++p) ASSERT_EQ(ran[p], 1) << "run " << run << " part " << p;
    }
    EXPECT_EQ(pool.runs(), threads == 1 ? 0 : 500 - 500 / 9 - 1);  // a run of one part is not shared
    pool.Run(0, [](int) { FAIL() << "no part to run"; });
  }
  WorkPool autosize(0, 3);
  EXPECT_GE(autosize.size(), 1);
  EXPECT_LE(autosize.size(), 3);
}

}  // namespace
}  // namespace tessera
