// PserverNode: the pserver process around a PserverService. It reads the job's configuration
// and slot map from etcd, listens, claims the lowest free pserver index with a lease
// (advertising its address), serves that index's slots, feeds trainer departures (from etcd)
// to the service, and stops serving at once when its lease is in doubt or its key is gone.
// Stop() (SIGTERM) stops serving, revokes the lease so a successor can claim the index at
// once, and returns.
//
// Thread-safety: Run() blocks its caller; Stop() may be called from any thread (a signal
// handler thread).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "coord/etcd_client.h"
#include "tessera/status.h"

namespace tessera {

class PserverService;
class Checkpointer;

struct PserverOptions {
  etcd::EtcdOptions etcd;
  std::string job;
  std::string secret_file;  // the job's secret from this file instead of etcd (job_store.h)
  std::string tls_ca_file, tls_cert_file, tls_key_file;  // a --tls job\'s (job_store.h LoadJobTls)
  std::string host = "127.0.0.1";                        // address to listen on (may be 0.0.0.0)
  std::string advertise;                                 // address registered for trainers (empty: `host`)
  int port = 0;                                          // 0: any free port
  int64_t lease_ttl_seconds = 10;
  // The pserver index to claim (it waits while another holds it); -1: the lowest free one.
  int index = -1;
  // Data-plane transports served: grpc, tcp, shm, or auto (all three; each trainer picks the
  // best it can reach). The registration lists every endpoint.
  std::string transport = "auto";
  // The largest request payload accepted by the tcp and shm transports (a larger frame closes
  // that connection).
  size_t max_message_bytes = size_t{2} << 30;
  // Checkpoints of the shard (see checkpointer.h): none when `checkpoint_dir` is empty. One is
  // taken right after initialization, then every `checkpoint_seconds` and/or every
  // `checkpoint_steps` versions (0: that trigger is off), when the version moved.
  std::string checkpoint_dir;
  double checkpoint_seconds = 0;
  int64_t checkpoint_steps = 0;
  // Incremental checkpoints (delta_policy.h): a checkpoint holds only the sparse rows changed
  // since the last one until the deltas pass this fraction of the base (0: always whole).
  double checkpoint_delta_fraction = 0.5;
  // Threads that share a step's dense updates and one large sparse request's rows (0: the
  // machine's, at most 8).
  int apply_threads = 0;
  // TransportOptions::busy_poll of the tcp and shm servers (common/busy_poll.h).
  std::chrono::microseconds busy_poll{0};
  // Prometheus metrics at http://<http_host>:<http_port>/metrics (0: any free port, recorded in
  // the registration as "metrics"; -1: off). `http_host` empty: 127.0.0.1; off loopback every
  // request but /healthz and /readyz needs the job's console token.
  int http_port = 0;
  std::string http_host;
};

namespace metrics {
class Registry;
}

class PserverNode {
 public:
  explicit PserverNode(PserverOptions options);
  ~PserverNode();

  // Runs until Stop() or until the lease is lost. OK after Stop(); Aborted if the lease was lost;
  // another error if start-up failed (no such job, port in use, etcd unreachable).
  Status Run();
  void Stop();

  // Valid once serving (for tests and logs).
  int index() const { return index_.load(); }
  int64_t epoch() const { return epoch_.load(); }

 private:
  // The phases of a run, each an object of its own (pserver_node_startup.h): Startup (etcd, the
  // job, the transports, the lease, the HTTP endpoints), then one of the two ways to serve:
  // OneIndex (an index of the slot map, pserver_node_one_index.cc) or ReplicatedHost (a host of
  // a replicated or elastic job, pserver_node_replicas.cc).
  class Startup;
  class OneIndex;
  class ReplicatedHost;

  // Writes a service's checkpoints until Stop() or the lease is lost (pserver_node_checkpoints.cc).
  void CheckpointLoop(PserverService* service, Checkpointer* checkpointer, bool consistent);
  // Wakes every CheckpointLoop (a service has a due snapshot).
  void WakeCheckpointThreads();
  void ObserveCheckpoint(double seconds, int64_t version);
  // Marks the run lost (the first reason wins) and wakes Run; false if it already was.
  bool MarkLost(Status why);
  bool stop_requested();
  // Waits up to `d` for Stop(); true if it came.
  bool WaitForStop(std::chrono::milliseconds d);
  metrics::Registry* prom_ = nullptr;  // the node's metrics, while Run() runs
  std::atomic<int64_t> last_checkpoint_ms_{0};

  PserverOptions options_;
  std::atomic<int> index_{-1};
  std::atomic<int64_t> epoch_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool lost_ = false;
  // Counts the services' calls of snapshot_due: a checkpoint thread wakes when it moves.
  std::atomic<uint64_t> snapshot_wakes_{0};
  Status lost_reason_;
};

}  // namespace tessera
