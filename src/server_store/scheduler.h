// Scheduler: which queued jobs start, with how many trainers, and which running jobs shrink or
// grow — one pure function of the jobs, the backend's capacity and the namespaces' quotas
// (no clock, no I/O; the server applies its decisions and asks again).
//
// A job uses (pservers + trainers) processes' worth of its per-process resources (cpu,
// memory, gpus); it counts one job, its trainers and its pservers against its namespace's
// quota. The rules:
//   1. Queued jobs are taken by priority (higher first), then submission time, then id.
//   2. A job that its namespace's quota cannot take now (even at its minimum of trainers) waits
//      with the reason; it does not hold back other jobs.
//   3. A job starts with as many trainers (up to its maximum, at least its minimum) as the free
//      capacity and its quota allow.
//   4. When its minimum does not fit, running elastic jobs of lower priority are shrunk toward
//      their minimum of trainers (lowest priority first, then the newest) until it does — never
//      killed. If even that is not enough, nothing is shrunk, the job waits for resources, and no
//      job of its priority or lower starts past it (no starvation by smaller jobs).
//   5. When no job waits for resources, running jobs below their maximum grow back (highest
//      priority first) as far as capacity and quota allow.
// Thread-safe (pure).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::server {

struct Resources {
  double cpu = 0;
  int64_t memory_mb = 0;
  int64_t gpus = 0;
};

struct QuotaLimits {  // nullopt: no limit
  std::optional<int64_t> jobs, trainers, pservers;
  std::optional<double> cpu;
  std::optional<int64_t> memory_mb, gpus, storage_mb;
};

struct SchedJob {
  std::string id, ns;
  int64_t priority = 0;
  int64_t submitted_ms = 0;
  bool running = false;  // holds resources (starting or running); otherwise queued
  int pservers = 1;
  int trainers = 0;  // running: trainers it has now
  int min_trainers = 1, max_trainers = 1;
  Resources per_process;
};

struct SchedInput {
  Resources capacity;
  std::map<std::string, QuotaLimits> quotas;  // by namespace; absent: no limits
  std::vector<SchedJob> jobs;
};

struct Decision {
  enum Kind { kStart, kResize, kWait };
  Kind kind = kWait;
  std::string id;
  int trainers = 0;    // kStart, kResize: the job's trainers
  std::string reason;  // why (for people)
};

std::vector<Decision> Schedule(const SchedInput& in);

// What a namespace uses: jobs, trainers, pservers, and resources.
struct Usage {
  int64_t jobs = 0, trainers = 0, pservers = 0;
  Resources resources;
};
Usage UsageOf(const SchedJob& j, int trainers);
Usage NamespaceUsage(const SchedInput& in, const std::string& ns);

// "" when `used` is within `limits`, else the first limit exceeded ("2 concurrent jobs (quota 1)").
std::string OverQuota(const Usage& used, const QuotaLimits& limits);
// "" when `need` fits in `free`, else what is short.
std::string Short(const Resources& need, const Resources& free);

}  // namespace tessera::server
