// TurnOffDeadlockChecks: a lock-order cycle among absl mutexes aborts a process by this absl's
// default, and does not once the checks are off.
#include "common/deadlock_checks.h"

#include <absl/synchronization/mutex.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace tessera {
namespace {

// a then b, then b then a: a cycle in the lock-order graph, though nothing deadlocks here.
void TakeTwoLocksInBothOrders() {
  absl::Mutex a, b;
  {
    absl::MutexLock la(&a);
    absl::MutexLock lb(&b);
  }
  {
    absl::MutexLock lb(&b);
    absl::MutexLock la(&a);
  }
}

TEST(DeadlockChecksDeathTest, ThisAbslAbortsOnALockOrderCycleByDefault) {
  // What makes the checks worth turning off: they are on in Debian's absl (a release build of absl
  // would ignore cycles, and this test would say so).
  EXPECT_DEATH(TakeTwoLocksInBothOrders(), "deadlock");
}

TEST(DeadlockChecksDeathTest, OffTheSameCycleIsIgnored) {
  EXPECT_EXIT(
      {
        TurnOffDeadlockChecks();
        TakeTwoLocksInBothOrders();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tessera
