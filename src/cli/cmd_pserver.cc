// `tessera pserver`: run one parameter server of a job.
#include <cstdlib>

#include "cli/address_flags.h"
#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "common/busy_poll.h"
#include "common/flag_names.h"
#include "common/logging.h"
#include "common/strings.h"
#include "pserver/pserver_node.h"

namespace tessera::cli {
namespace {

struct PserverFlags {
  EtcdFlags etcd;
  AddressFlags address;
  int port = 0;
  int http_port = 0;
  std::string http_host;
  int index = -1;
  int64_t lease_ttl = 10;
  std::string transport = "auto";
  int64_t max_message_mb = 2048;
  std::string checkpoint_dir;
  double checkpoint_every = 0;
  int64_t checkpoint_steps = 0;
  double checkpoint_delta_fraction = 0.5;
  int apply_threads = 0;
  int busy_poll_us = -1;  // -1: TESSERA_BUSY_POLL_US, else 0
  std::string log_level = "info";
  std::string log_file;
};

int RunPserver(const PserverFlags& f) {
  PserverNode* node_ptr = nullptr;
  std::mutex mu;
  SignalWatcher watcher([&](int) {
    std::lock_guard<std::mutex> lock(mu);
    if (node_ptr) node_ptr->Stop();
  });
  LogOptions lo;
  lo.job = f.etcd.job;
  lo.node = "pserver";
  lo.level = f.log_level;
  lo.file = f.log_file;
  Status ls = InitLogging(lo);
  if (!ls.ok()) return Fail("pserver", ls);
  auto eo = EtcdOptionsFromFlags(f.etcd);
  if (!eo.ok()) return Fail("pserver", eo.status());
  if (f.lease_ttl < 2)
    return Fail("pserver", Status::InvalidArgument("--lease-ttl must be at least 2 seconds"));
  PserverOptions o;
  o.etcd = *eo;
  o.job = f.etcd.job;
  o.secret_file = f.etcd.secret_file;
  o.tls_ca_file = f.etcd.tls_ca;
  o.tls_cert_file = f.etcd.tls_cert;
  o.tls_key_file = f.etcd.tls_key;
  auto addr = ResolveAddressFlags(f.address, eo->endpoints);
  if (!addr.ok()) return Fail("pserver", addr.status());
  o.host = addr->listen;
  o.advertise = addr->advertise;
  o.port = f.port;
  o.http_port = f.http_port;
  o.http_host = f.http_host;
  o.lease_ttl_seconds = f.lease_ttl;
  o.index = f.index;
  o.transport = f.transport;
  if (f.max_message_mb < 1 || f.max_message_mb > (int64_t{1} << 20)) {
    return Fail("pserver", Status::InvalidArgument("--max-message-mb must be between 1 and 1048576"));
  }
  o.max_message_bytes = static_cast<size_t>(f.max_message_mb) << 20;
  o.checkpoint_dir = f.checkpoint_dir;
  o.checkpoint_seconds = f.checkpoint_every;
  o.checkpoint_steps = f.checkpoint_steps;
  o.checkpoint_delta_fraction = f.checkpoint_delta_fraction;
  o.apply_threads = f.apply_threads;
  if (f.busy_poll_us >= 0) {
    o.busy_poll = std::chrono::microseconds(f.busy_poll_us);
  } else {
    auto spin = BusyPollFromEnvironment(::getenv);
    if (!spin.ok()) return Fail("pserver", spin.status());
    o.busy_poll = *spin;
  }
  if (o.checkpoint_dir.empty() && (f.checkpoint_every > 0 || f.checkpoint_steps > 0)) {
    return Fail("pserver",
                Status::InvalidArgument("--checkpoint-every/--checkpoint-steps need --checkpoint-dir"));
  }
  if (f.checkpoint_every < 0 || f.checkpoint_steps < 0) {
    return Fail("pserver",
                Status::InvalidArgument("--checkpoint-every and --checkpoint-steps must not be negative"));
  }
  PserverNode node(o);
  {
    std::lock_guard<std::mutex> lock(mu);
    node_ptr = &node;
    if (watcher.received()) node.Stop();
  }
  Status s = node.Run();
  {
    std::lock_guard<std::mutex> lock(mu);
    node_ptr = nullptr;
  }
  if (s.ok()) return 0;
  if (s.code() == StatusCode::kAborted) return 3;  // lease lost: a supervisor restarts us
  return Fail("pserver", s);
}

}  // namespace

void RegisterPserver(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<PserverFlags>();
  auto* cmd = app.add_subcommand(
      flags::kCommandPserver,
      "Run a parameter server: claims the lowest free pserver index of the job (with a lease),\n"
      "serves that index's slots, and stops serving at once if its lease is lost.\n"
      "Exit codes: 0 after SIGTERM/SIGINT, 3 when the lease was lost, 1 on errors.");
  AddEtcdFlags(cmd, &f->etcd);
  AddAddressFlags(cmd, &f->address);
  cmd->add_option("--port", f->port,
                  "port of the main data-plane transport (tcp when served, else grpc; 0: any free port); the "
                  "other transports take free ports, and every endpoint is registered in etcd")
      ->capture_default_str();
  cmd->add_option(
         flags::kIndex, f->index,
         "serve this pserver index only, waiting while another holds it (default -1: the lowest free "
         "index)")
      ->capture_default_str();
  cmd->add_option(flags::kLeaseTtl, f->lease_ttl,
                  "seconds without keep-alive after which etcd drops this pserver")
      ->capture_default_str();
  cmd->add_option(
         flags::kTransport, f->transport,
         "data-plane transports to serve: auto (tcp, shm and grpc; each trainer takes shared memory on "
         "the same host, else tcp), tcp, shm or grpc")
      ->check(CLI::IsMember({"auto", "tcp", "shm", "grpc"}))
      ->capture_default_str();
  cmd->add_option(
         "--max-message-mb", f->max_message_mb,
         "largest request payload accepted over tcp and shm, in MiB (a larger frame closes the connection)")
      ->capture_default_str();
  cmd->add_option(flags::kCheckpointDir, f->checkpoint_dir,
                  "directory for shard checkpoints (local disk or a shared mount); a restarted pserver loads "
                  "the newest good one recorded in etcd. Empty: no checkpoints");
  cmd->add_option(flags::kCheckpointEvery, f->checkpoint_every,
                  "seconds between checkpoints (0: off; one is always taken right after initialization)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-steps", f->checkpoint_steps, "versions between checkpoints (0: off)")
      ->capture_default_str();
  cmd->add_option("--apply-threads", f->apply_threads,
                  "threads that share one large update: a step's dense updates (64Ki values or more) and a "
                  "sparse request of 4096 rows or more of a table without limits (key checks, lookups, "
                  "copies, updates), the same bits as one thread. 0: the machine's hardware threads, at "
                  "most 8; 1: one thread")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option(
         flags::kBusyPoll, f->busy_poll_us,
         "microseconds a connection waiting for a trainer's next request checks for it without "
         "sleeping first (saves a wake-up per request; keeps a core busy meanwhile, so only for a "
         "pserver with a core of its own; it backs off by itself when it loses its core or the requests "
         "keep coming later). Default: $TESSERA_BUSY_POLL_US (which tessera local and "
         "tessera launch set when the host's trainers and pservers have a core each), else 0")
      ->check(CLI::Range(0, kMaxBusyPollMicros));
  cmd->add_option("--checkpoint-delta-fraction", f->checkpoint_delta_fraction,
                  "incremental checkpoints: write only the sparse rows changed since the last checkpoint, "
                  "until those deltas pass this fraction of the last whole one (then a whole one again; "
                  "at most 16 deltas in a row). 0: every checkpoint whole")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_option(flags::kHttpHost, f->http_host,
                  "address /metrics, /healthz and /readyz bind (default 127.0.0.1; anywhere else /metrics "
                  "needs the job's console token, see docs/security.md)");
  cmd->add_option(flags::kHttpPort, f->http_port, "port of /metrics (Prometheus; 0: any free port, -1: off)")
      ->capture_default_str();
  cmd->add_option("--log-level", f->log_level, "trace, debug, info, warn, error")->capture_default_str();
  cmd->add_option("--log-file", f->log_file, "also write the log to this file");
  cmd->callback([f, exit_code] { *exit_code = RunPserver(*f); });
}

}  // namespace tessera::cli
