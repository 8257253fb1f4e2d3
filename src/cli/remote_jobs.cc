// Following a job's log and state (see remote_jobs.h).
#include "cli/remote_jobs.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/remote_flags.h"
#include "common/strings.h"

namespace tessera::cli {
namespace {

void Nap(const std::atomic<bool>& interrupted, int ms) {
  for (int i = 0; i < ms / 50 && !interrupted; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

bool Ended(const remote::Json& job) { return !job.value("ended_ms", remote::Json()).is_null(); }

}  // namespace

std::string Outcome(const remote::Json& job) {
  std::string s = "job " + job.value("id", "") + " " + job.value("state", "");
  if (job["started_ms"].is_number() && job["ended_ms"].is_number())
    s += " after " +
         std::to_string((job["ended_ms"].get<int64_t>() - job["started_ms"].get<int64_t>()) / 1000) + " s";
  const auto& result = job.value("result", remote::Json());
  std::vector<std::string> metrics;
  if (result.is_object() && result.contains("metrics") && result["metrics"].is_object())
    for (const auto& [k, v] : result["metrics"].items())
      if (v.is_number()) metrics.push_back(k + " " + JsonValueText(v));
  if (!metrics.empty()) s += ": " + Join(metrics, ", ");
  const std::string reason = job.value("reason", "");
  if (job.value("state", "") != "succeeded" && !reason.empty()) s += " (" + reason + ")";
  return s;
}

Status FollowLog(remote::ApiClient& api, const std::string& id, const std::string& node, int tail,
                 const std::atomic<bool>& interrupted) {
  // A queued job has no logs yet: wait for this one to appear, or for the job to end.
  for (;;) {
    if (interrupted) return Status::Cancelled("interrupted");
    TESSERA_ASSIGN_OR_RETURN(remote::Json logs, api.Get("/api/v1/jobs/" + id + "/logs"));
    bool found = false;
    std::vector<std::string> names;
    for (const auto& l : logs.value("logs", remote::Json::array())) {
      names.push_back(l.value("node", ""));
      found = found || names.back() == node;
    }
    if (found) break;
    TESSERA_ASSIGN_OR_RETURN(remote::Json job, api.Get("/api/v1/jobs/" + id));
    if (Ended(job))
      return Status::NotFound("job " + id + " ended without a log of '" + node + "'" +
                              (names.empty() ? std::string() : " (its logs: " + Join(names, ", ") + ")"));
    Nap(interrupted, 1000);
  }
  std::string from;
  if (tail > 0) {
    TESSERA_ASSIGN_OR_RETURN(
        remote::Json t, api.Get("/api/v1/jobs/" + id + "/logs/" + node + "?tail=" + std::to_string(tail)));
    std::fputs(t.value("text", "").c_str(), stdout);
    std::fflush(stdout);
    from = "?offset=" + std::to_string(t.value("next", int64_t{0}));
  } else if (tail == 0) {
    from = "?offset=0";
  }
  Status s =
      api.Follow("/api/v1/jobs/" + id + "/logs/" + node + "/follow" + from, [&](const remote::SseEvent& e) {
        std::fputs((e.data + "\n").c_str(), stdout);
        std::fflush(stdout);
        return !interrupted.load();
      });
  if (interrupted) return Status::Cancelled("interrupted");
  return s;
}

int WaitForJob(remote::ApiClient& api, const std::string& id, const std::string& node,
               const std::atomic<bool>& interrupted) {
  auto interrupted_note = [&] {
    std::fprintf(stderr, "\nstopped watching; job %s goes on (`tessera stop %s` stops it)\n", id.c_str(),
                 id.c_str());
    return 130;
  };
  if (!node.empty()) {
    Status s = FollowLog(api, id, node, 0, interrupted);
    if (interrupted) return interrupted_note();
    if (!s.ok()) std::fprintf(stderr, "tessera: %s\n", s.message().c_str());
  }
  std::string last;
  for (int failures = 0;;) {
    if (interrupted) return interrupted_note();
    auto job = api.Get("/api/v1/jobs/" + id);
    if (!job.ok()) {
      // The server restarting: it keeps the job, so try again for a while.
      if (job.status().code() != StatusCode::kUnavailable || ++failures > 60) {
        std::fprintf(stderr, "tessera: %s\n", job.status().message().c_str());
        return 1;
      }
      Nap(interrupted, 1000);
      continue;
    }
    failures = 0;
    const std::string state = (*job)["state"].get<std::string>();
    if (Ended(*job)) {
      std::fprintf(stderr, "%s\n", Outcome(*job).c_str());
      return state == "succeeded" ? 0 : 1;
    }
    const std::string now = state + ": " + job->value("reason", "");
    if (node.empty() && now != last) {
      std::fprintf(stderr, "job %s %s\n", id.c_str(), now.c_str());
      last = now;
    }
    Nap(interrupted, 1000);
  }
}

}  // namespace tessera::cli
