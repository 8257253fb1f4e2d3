// Logging set-up (see logging.h).
#include "common/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace tessera {
namespace {

std::mutex g_mu;
LogOptions g_options;

std::string Pattern(const LogOptions& o) {
  // %L is the one-letter level; job and node are baked into the pattern.
  std::string p = "%Y-%m-%d %H:%M:%S.%e %L [job=";
  p += o.job;
  p += " node=";
  p += o.node;
  p += "] %v";
  return p;
}

}  // namespace

Status InitLogging(const LogOptions& options) {
  auto level = spdlog::level::from_str(options.level);
  if (level == spdlog::level::off && options.level != "off") {
    return Status::InvalidArgument("unknown log level '" + options.level +
                                   "' (use trace, debug, info, warn, error, critical or off)");
  }
  std::vector<spdlog::sink_ptr> sinks;
  if (options.to_stderr) sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (!options.file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file));
    } catch (const spdlog::spdlog_ex& e) {
      return Status::InvalidArgument("cannot open log file '" + options.file + "': " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("tessera", sinks.begin(), sinks.end());
  logger->set_level(level);
  logger->flush_on(spdlog::level::info);
  std::lock_guard<std::mutex> lock(g_mu);
  g_options = options;
  logger->set_pattern(Pattern(g_options));
  spdlog::set_default_logger(logger);
  return Status::OK();
}

void SetLogNode(const std::string& node) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_options.node = node;
  spdlog::default_logger()->set_pattern(Pattern(g_options));
}

namespace internal {
void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, cond);
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

}  // namespace tessera
