// Session: what a user's trainer program holds while it trains under Tessera: the parameter
// client, the reader of dispatched tasks, progress reports to the master. The Python module and
// the C API are thin shells around it; the built-in trainer loop has the same shape.
//
// Coordinates come from arguments or, where those are empty, from the environment that
// `tessera local` (or a cluster launcher) sets for a trainer: TESSERA_ETCD, TESSERA_JOB,
// TESSERA_TRAINER_ID, TESSERA_STORE, TESSERA_LEASE_TTL.
//
// Records: NextRecord() returns the next record of the tasks this trainer was handed, kWait when
// there is nothing for it right now (the rest of the pass is with other trainers: train what you
// hold, or call Idle() to take part in the step with an empty push so the others are not held
// up), or kDone when every pass is done. Trained() acknowledges every record returned so far
// (call it after the step that used them): a task is never acknowledged before it is trained.
//
// Part of the public API (the Python module is built on it alone). Thread-safety: one thread at a
// time (a trainer's loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/client.h"
#include "tessera/reader.h"
#include "tessera/status.h"

namespace tessera::api {

struct SessionOptions {
  // Empty fields come from the environment (TESSERA_ETCD, TESSERA_JOB, TESSERA_ETCD_USER, ...:
  // see tessera/connection.h).
  ConnectionOptions connection;
  std::string trainer_id;         // empty: TESSERA_TRAINER_ID, else the lowest free number
  std::string store;              // empty: TESSERA_STORE, else the master's path
  int64_t lease_ttl_seconds = 0;  // 0: TESSERA_LEASE_TTL, else 10
  std::string transport;          // empty: TESSERA_TRANSPORT, else auto (see ClientOptions)
  int pipeline = -1;              // ClientOptions::pipeline; -1: TESSERA_PIPELINE (0 or 1), else 1
  // ClientOptions::busy_poll in microseconds; -1: TESSERA_BUSY_POLL_US, else 0.
  int busy_poll_us = -1;
  // /healthz and /readyz (ready once joined) on this port; -1: TESSERA_HTTP_PORT, else none; 0: any
  // free port. Bound on TESSERA_ADVERTISE or POD_IP when set, else 127.0.0.1.
  int http_port = -1;
  std::string http_host;
  std::chrono::milliseconds request_timeout{std::chrono::minutes(5)};
  // Open() fails after this long if no etcd endpoint accepts connections, saying why.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(2)};

  // Fills empty fields from the environment; InvalidArgument naming what is missing.
  Status ResolveFromEnvironment();
};

// A data set read in full from the store, outside the task queue (for evaluation).
class LocalDataset {
 public:
  static StatusOr<std::unique_ptr<LocalDataset>> Open(const std::string& store, const std::string& name);
  // The next record, in manifest order; false at the end.
  StatusOr<bool> Next(std::string* record);
  void Rewind();
  int64_t records() const;

  ~LocalDataset();

 private:
  struct Impl;
  explicit LocalDataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Open(SessionOptions options);
  ~Session();

  Client& client() { return *client_; }
  const SessionOptions& options() const { return options_; }

  // Parameters: after declaring them on client(), Initialize() makes every pserver hold them and
  // pulls the current values.
  Status Initialize();

  // The job's data set (the one the master hands out), as the master reports it.
  StatusOr<std::string> JobDataset();
  // Dispatched records (see above). REQUIRES: Initialize() done.
  enum class Next { kRecord, kWait, kDone };
  StatusOr<Next> NextRecord(std::string* record);
  // For reading the next batch while a step's push is on its way: the next record of the task at
  // hand only (false when it has none left; nothing is fetched, the pass does not move on, and
  // Reader::NextInTask says why that keeps acknowledgements right). Such records count as
  // returned after that step (consistent checkpoints' positions): Trained(), called once the
  // step is done, books them there.
  StatusOr<bool> NextRecordInTask(std::string* record);
  Status Trained();
  // Nothing held and nothing to read: acknowledges, and takes part in the step with an empty
  // push (sync/ssp). It pauses 10 ms first unless other trainers are training in a sync job
  // (their steps pace the empty ones, and a pause would hold each of their steps).
  Status Idle();
  int pass() const;  // 0-based pass of the last record
  // 0-based pass the job is in as the master last said (passes() when done; -1 before any
  // answer). It moves on also while this trainer reads nothing: the previous pass is then over
  // everywhere (see Reader::job_pass).
  int job_pass() const;
  int passes() const;  // 0 until the first record
  bool finished() const;
  std::string record_type() const;

  // One step with no gradient (sync/ssp: keeps this trainer in the barrier). No-op in async.
  Status EmptyStep();

  // Progress and evaluation results to the master (sent about once a second).
  void Report(int64_t samples, double cost_sum);
  void ReportMetrics(const std::vector<std::pair<std::string, double>>& metrics, int pass);
  // Whether this trainer is the lowest live one (the one that should evaluate).
  bool IsEvaluator();

  // Flushes reports, acknowledges what was trained, deregisters. Idempotent.
  Status Close();

 private:
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  Status OpenReader();
  // After a step: at a consistent checkpoint version, reports the data position to the master.
  Status AfterStep();

  SessionOptions options_;
  std::unique_ptr<Impl> impl_;
  Client* client_ = nullptr;
};

// Reads every parameter of `options`' job from its pservers (all shards merged) and writes it
// to a model file at `path`, atomically. It does not register as a trainer, so it can run beside
// or after training.
Status ExportModelFile(const SessionOptions& options, const std::string& path,
                       std::chrono::milliseconds timeout);

// Logs of this process to stderr with the job and node on every line, at `level` (trace, debug,
// info, warn, error).
Status InitLogging(const std::string& job, const std::string& node, const std::string& level);

}  // namespace tessera::api
