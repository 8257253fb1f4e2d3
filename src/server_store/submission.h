// Submission: what a job submission asks for, read strictly from a request body and kept as JSON;
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

// What a job submission asks for. Its training is the one job spec (spec/job_spec.h) whichever way
// it came: a whole spec ("spec" in the body: the job.yaml of `tessera local --spec`, every setting
// the user's), or the field-by-field form (the console's and the notebook client's: name, model or
// package and command, data sets, mode, optimizer, passes, batch size, pservers, trainers) over
// the platform's defaults (FieldFormDefaults). Beside it, what only the platform decides: the code
// package, the priority and each process's share of the machine. Stored as JSON in the same form
// older servers wrote and read, so a job submitted before an upgrade still reads after it.
struct Submission {
  // The training; its name is the user's (empty: the server names the job). The store, the
  // checkpoints' directory, the etcd and the code's place are the backend's to fill.
  spec::JobSpec training = FieldFormDefaults();
  bool whole_spec = false;  // submitted as a whole spec
  std::string package;      // SHA-256 of the code package train.command runs in; empty: a built-in model
  Resources resources{0.5, 512, 0};  // per process
  int64_t priority = 0;

  // The field-by-field form's defaults: the spec's, with one master.
  static spec::JobSpec FieldFormDefaults();
  // The trainer's command as one /bin/sh line (spec::ShellLine); empty for a built-in model.
  std::string command() const;
  // The training as job `id` (its name in the job's processes).
  spec::JobSpec Training(const std::string& id) const;
  // Asks for `trainers` trainers from now on (the first step waits for no more than that).
  void ScaleTo(int trainers);
  nlohmann::json ToJson() const;
  // Reads and checks a submission (InvalidArgument naming the field).
  static StatusOr<Submission> FromBody(const std::string& body);
  // A stored submission back, as this server or an older one wrote it (lenient: defaults for what
  // is missing).
  static Submission FromJson(const nlohmann::json& j);
};

struct JobInfo {
  std::string id, ns, name, owner, state, reason, backend;
  Submission spec;
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
