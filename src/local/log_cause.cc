// CauseFromLog (see log_cause.h).
#include "local/log_cause.h"

#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <vector>

#include "common/logging.h"
#include "common/strings.h"

namespace tessera::local {
namespace {

constexpr size_t kMaxCause = 300;

std::string Trimmed(std::string s) {
  if (s.rfind(kNoticeMark, 0) == 0) s.erase(0, std::string_view(kNoticeMark).size());
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  size_t start = s.find_first_not_of(" \t");
  s = start == std::string::npos ? "" : s.substr(start);
  if (s.size() > kMaxCause) s = s.substr(0, kMaxCause - 3) + "...";
  return s;
}

// The cause in one line, or "".
std::string CauseIn(const std::string& line) {
  if (line.empty()) return "";
  if (line.front() == '{') {  // etcd (zap) and other JSON loggers
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) {
      const std::string level = j.value("level", "");
      if (level != "error" && level != "fatal" && level != "panic" && level != "dpanic") return "";
      std::string msg = j.value("msg", "");
      if (j.contains("error") && j["error"].is_string())
        msg += (msg.empty() ? "" : ": ") + j["error"].get<std::string>();
      return Trimmed(msg);
    }
  }
  static const std::regex spdlog_level(R"(\[(error|critical)\]\s*(.*))");
  std::smatch m;
  if (std::regex_search(line, m, spdlog_level)) return Trimmed(m[2]);
  static const std::regex go_or_python(
      R"(^(panic: |Error: |[A-Za-z_][\w.]*(Error|Exception|Interrupt): ).*)");
  if (std::regex_match(line, go_or_python)) return Trimmed(line);
  return "";
}

}  // namespace

std::string CauseFromLog(std::string_view log) {
  std::vector<std::string> lines = Split(std::string(log), '\n');
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::string c = CauseIn(*it);
    if (c.empty()) continue;
    // Go's "panic: M" repeats the message of the JSON line logged just before it, which also
    // has the error: that line says more.
    if (c.rfind("panic: ", 0) == 0) {
      const std::string msg = c.substr(7);
      for (auto before = std::next(it); before != lines.rend() && before - it <= 20; ++before) {
        std::string earlier = CauseIn(*before);
        if (!earlier.empty() && earlier.rfind(msg, 0) == 0) return earlier;
      }
    }
    return c;
  }
  return "";
}

}  // namespace tessera::local
