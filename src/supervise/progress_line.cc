// Progress line (see progress_line.h).
#include "supervise/progress_line.h"

#include <fmt/format.h>

#include <map>

namespace tessera::supervise {
namespace {

// The metrics of the latest pass that has any.
std::map<std::string, double> LatestMetrics(const master::StatusReply& s, int* pass) {
  std::map<std::string, double> out;
  *pass = -1;
  for (const auto& m : s.metrics()) *pass = std::max(*pass, m.pass());
  for (const auto& m : s.metrics()) {
    if (m.pass() == *pass) out[m.name()] = m.value();
  }
  return out;
}

}  // namespace

std::string ProgressLine(const master::StatusReply& s, int trainers_running) {
  int64_t finished_tasks = s.done() + s.failed();
  std::string line =
      fmt::format("pass {}/{}  tasks {}/{}", s.pass() + 1, s.passes(), finished_tasks, s.tasks());
  if (s.failed() > 0) line += fmt::format(" ({} failed)", s.failed());
  line += fmt::format("  {:.0f} samples/s", s.samples_per_second());
  if (s.samples() > 0) line += fmt::format("  cost {:.4f}", s.last_cost());
  int pass;
  auto metrics = LatestMetrics(s, &pass);
  for (const auto& [name, value] : metrics) line += fmt::format("  {} {:.4f}", name, value);
  if (!metrics.empty()) line += fmt::format(" (pass {})", pass + 1);
  line += fmt::format("  trainers {}", trainers_running);
  return line;
}

std::string FinalMetrics(const master::StatusReply& s) {
  int pass;
  auto metrics = LatestMetrics(s, &pass);
  if (metrics.empty()) return "no evaluation metrics";
  std::string out;
  for (const auto& [name, value] : metrics)
    out += fmt::format("{}{} {:.4f}", out.empty() ? "" : ", ", name, value);
  return out + fmt::format(" (after pass {})", pass + 1);
}

nlohmann::json ResultJson(const std::string& job, const master::StatusReply& s,
                          const std::string& model_path) {
  nlohmann::json res = {{"job", job},
                        {"passes", s.passes()},
                        {"tasks", s.tasks()},
                        {"failed_tasks", s.failed()},
                        {"split_tasks", s.splits()},
                        {"samples", s.samples()},
                        {"model", model_path},
                        {"summary", FinalMetrics(s)}};
  auto metrics = nlohmann::json::object();
  for (const auto& m : s.metrics()) metrics[m.name()] = m.value();  // the latest pass wins
  res["metrics"] = metrics;
  return res;
}

}  // namespace tessera::supervise
