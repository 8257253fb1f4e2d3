// absl's deadlock checks off (see deadlock_checks.h).
#include "common/deadlock_checks.h"

#include <absl/synchronization/mutex.h>

namespace tessera {

void TurnOffDeadlockChecks() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace tessera
