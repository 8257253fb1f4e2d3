// Watching a job on a tessera server from the command line: following one of its logs as it is
// written, or its state, until it ends. Shared by `tessera submit --wait/-f` and `tessera logs
// -f`. Used only by src/cli.
#pragma once

#include <atomic>
#include <string>

#include "remote/api_client.h"
#include "tessera/status.h"

namespace tessera::cli {

// Prints the log `node` of job `id` to stdout as it grows, from `offset` (-1: only what is new;
// with `tail` > 0 the last `tail` lines first), until the job ends and the log is read, or
// `interrupted`. A log that does not exist yet (a queued job) is waited for.
Status FollowLog(remote::ApiClient& api, const std::string& id, const std::string& node, int tail,
                 const std::atomic<bool>& interrupted);

// Waits for job `id` to end, following the log `node` (or, for "", printing its state changes to
// stderr), then prints how it ended. The exit code: 0 succeeded, 1 failed or stopped, 130
// interrupted (the job goes on).
int WaitForJob(remote::ApiClient& api, const std::string& id, const std::string& node,
               const std::atomic<bool>& interrupted);

// One line on how a job ended: "job X succeeded in 42 s: accuracy 0.85".
std::string Outcome(const remote::Json& job);

}  // namespace tessera::cli
