// MasterNode: the `tessera master` process. It listens, then campaigns in the job's master
// election (standbys wait there). Once leading it loads the task queue from etcd (or creates it
// from the data set's manifest), replays the logged events, and serves trainers until stopped,
// deposed, or its lease is lost. A clean stop resigns so a standby takes over at once.
// Thread-safety: Run() blocks its caller; Stop() may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>

#include "coord/etcd_client.h"
#include "master/task_queue.h"
#include "tessera/status.h"

namespace tessera::master {

struct MasterOptions {
  etcd::EtcdOptions etcd;
  std::string job;
  std::string secret_file;  // the job's secret from this file instead of etcd (job_store.h)
  std::string tls_ca_file, tls_cert_file, tls_key_file;  // a --tls job\'s (job_store.h LoadJobTls)
  std::string store;
  std::string dataset;
  std::string host = "127.0.0.1";  // address to listen on (may be 0.0.0.0)
  std::string advertise;           // address registered for trainers (empty: `host`)
  int port = 0;
  int64_t lease_ttl_seconds = 10;
  // chunks and chunk_records are taken from the data set; min_tasks -1: 4 x the job's min
  // trainers, at least 8; chunks_per_task 0: the master's choice (AutoChunksPerTask).
  TaskQueueOptions queue;
  // Idle trainers take the rest of a slow trainer's task (TaskQueue splits; never in jobs with
  // consistent checkpoints).
  bool split_tasks = true;
  int compact_every = 500;
  // The web console and /metrics (docs/console-api.md): -1 off, 0 any free port.
  // Where the console binds; empty: 127.0.0.1. Off loopback every request but /healthz and
  // /readyz needs the job's console token (common/http_access.h).
  std::string http_host;
  int http_port = 0;
  std::string log_dir;  // <node>.log files the console's logs panel reads (tessera local: RUN/logs)
  std::string web_dir;  // the console page; empty: next to the binary (../console in a build tree,
                        // ../share/tessera/web installed)
  // While leading, appends the console's history (cost, evaluations, nodes, status) to this
  // JSON-lines file (see run_history.h; tessera local: RUN/history.jsonl). Empty: none.
  std::string history_file;
};

class MasterNode {
 public:
  explicit MasterNode(MasterOptions options) : options_(std::move(options)) {}
  ~MasterNode() { Stop(); }
  // OK after Stop(); Aborted when deposed or the lease was lost; other errors at start-up.
  Status Run();
  void Stop();
  bool leading() const { return leading_.load(); }

 private:
  class Runtime;  // the phases of a run (master_node.cc)
  MasterOptions options_;
  std::atomic<bool> leading_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Status lost_;
};

}  // namespace tessera::master
