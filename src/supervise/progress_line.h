// The one-line progress summary `tessera local` shows (in place on a terminal, every few
// seconds otherwise), from the master's status. Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tessera/master.pb.h"

namespace tessera::supervise {

// "pass 2/5  tasks 30/46  4,210 samples/s  cost 0.412  accuracy 0.853 (pass 1)  trainers 2"
std::string ProgressLine(const master::StatusReply& s, int trainers_running);

// The latest value of each evaluation metric: "accuracy 0.8731, loss 0.3512 (pass 5)".
std::string FinalMetrics(const master::StatusReply& s);

// What a finished run reports in its result.json: passes, tasks, samples, the model file, the
// latest value of each metric.
nlohmann::json ResultJson(const std::string& job, const master::StatusReply& s,
                          const std::string& model_path);

}  // namespace tessera::supervise
