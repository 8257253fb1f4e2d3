// Process-wide logging set-up for Tessera processes (pserver, master, trainer, CLI).
//
// Every line carries the job and the node, e.g.
//   2026-11-21 10:00:00.123 I [job=mnist node=pserver-1] claimed index 1 (epoch 42)
// Call InitLogging() once from main() before starting threads; afterwards log with spdlog's free
// functions (spdlog::info(...), spdlog::warn(...)), which are thread-safe.
#pragma once

#include <string>

#include "tessera/status.h"

namespace tessera {

struct LogOptions {
  std::string job = "-";       // job name shown on every line
  std::string node = "-";      // node name shown on every line (e.g. "pserver-0", "trainer-3")
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
  std::string file;            // also append to this file when non-empty
  bool to_stderr = true;       // write to stderr (the default for every process)
};

// Installs the default logger. Returns InvalidArgument for an unknown level or an unwritable file.
Status InitLogging(const LogOptions& options);

// Changes the node shown on every line (a pserver learns its index after it starts).
void SetLogNode(const std::string& node);

// A log line that starts its message with this mark is also meant for the person at the terminal:
// `tessera local` shows it there with the process's name (local/log_notices.h). For what the job
// lost or could not do and the user should know at once (a checkpoint that failed, a shard
// re-initialized from a trainer's values), not for progress.
inline constexpr const char* kNoticeMark = "[notice] ";

}  // namespace tessera

// Aborts with a message when a programmer's invariant is broken. Never for bad input.
#define TESSERA_CHECK(cond)                                                   \
  do {                                                                        \
    if (!(cond)) ::tessera::internal::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (0)

namespace tessera::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond);
}  // namespace tessera::internal
