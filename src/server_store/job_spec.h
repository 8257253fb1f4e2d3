// JobSpec: what a job submission asks for, read strictly from a request body and kept as JSON;
// JobInfo: a job as the API shows it; quotas and usage as JSON. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server_store/scheduler.h"
#include "spec/job_spec.h"
#include "tessera/status.h"

namespace tessera::server {

struct JobSpec {
  std::string name;
  std::string model;    // built-in, or:
  std::string package;  // SHA-256 of a code package, with
  std::string command;  // its entry command
  std::string dataset, eval_dataset;
  std::vector<std::string> model_args;
  std::string mode = "sync", optimizer = spec::kDefaultOptimizer;
  int passes = 1, batch_size = 64, pservers = 1, trainers = 1, trainers_min = 1;
  Resources resources{0.5, 512, 0};  // per process
  int64_t priority = 0;
  // Submitted as a whole job spec ("spec" in the body: the job.yaml of `tessera local --spec`),
  // which then carries every setting; the fields above are read from it (for the scheduler and
  // the lists). Empty: submitted field by field, with the platform's defaults for the rest.
  std::optional<spec::JobSpec> training;
  nlohmann::json ToJson() const;
  // The training it asks for, in the one job spec (spec/job_spec.h), as job `id`: one master,
  // the spec's defaults for what a submission cannot say yet; the store, the code and the trainer
  // command are the backend's to place.
  spec::JobSpec Training(const std::string& id) const;
  // Reads and checks a submission (InvalidArgument naming the field).
  static StatusOr<JobSpec> FromBody(const std::string& body);
  // A stored spec back (lenient: defaults for what is missing).
  static JobSpec FromJson(const nlohmann::json& j);
};

struct JobInfo {
  std::string id, ns, name, owner, state, reason, backend;
  JobSpec spec;
  int trainers = 0;
  int64_t submitted_ms = 0, started_ms = 0, ended_ms = 0;
  nlohmann::json workers, result;
  nlohmann::json ToJson() const;
};

// QuotaLimits as JSON and back ({"jobs": 2, "cpu": 4, ...}; absent: no limit).
nlohmann::json QuotaJson(const QuotaLimits& q);
StatusOr<QuotaLimits> QuotaFromBody(const std::string& body);
nlohmann::json UsageJson(const Usage& u);

// `text` parsed as JSON, or `fallback` when it is not JSON (a column written by an older server).
nlohmann::json ParseJsonOr(const std::string& text, nlohmann::json fallback);

// InvalidArgument naming `field` unless lo <= v <= hi.
Status CheckRange(const std::string& field, int64_t v, int64_t lo, int64_t hi);

}  // namespace tessera::server
