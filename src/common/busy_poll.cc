// Busy polling's choice and setting: see busy_poll.h.
#include "common/busy_poll.h"

#include "common/flag_names.h"

namespace tessera {

std::optional<int> HostBusyPoll(int chosen, int cores, int processes,
                                const std::function<const char*(const char*)>& getenv) {
  if (chosen >= 0) return chosen;
  if (getenv(flags::kEnvBusyPoll) != nullptr || processes <= 0) return std::nullopt;
  return processes <= cores ? kBusyPollMicros : 0;
}

StatusOr<std::chrono::microseconds> BusyPollFromEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  const char* value = getenv(flags::kEnvBusyPoll);
  const std::string text = value ? value : "";
  if (text.empty()) return std::chrono::microseconds(0);
  const bool digits = text.size() <= 7 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(text) > kMaxBusyPollMicros) {
    return Status::InvalidArgument(std::string(flags::kEnvBusyPoll) + "='" + text +
                                   "' is not a number of microseconds from 0 to " +
                                   std::to_string(kMaxBusyPollMicros));
  }
  return std::chrono::microseconds(std::stoi(text));
}

}  // namespace tessera
