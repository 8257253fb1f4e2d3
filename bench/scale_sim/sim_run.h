// Run: one size of scale_sim (see scale_sim.cc): a fresh job in the etcd under test, its data set,
// pservers, masters and trainers, and every scenario run against them one after another (Go), or
// the passes of a long run (Long). Its figures come back as JSON.
#pragma once

#include <sys/types.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/net.h"
#include "common/process.h"
#include "common/random.h"
#include "common/strings.h"
#include "coord/etcd_client.h"
#include "sim_pserver.h"
#include "spec/role_argv.h"
#include "trainer_fleet.h"

namespace tessera::bench {

using Json = nlohmann::json;

struct SimOptions {
  std::vector<int> trainers = {10, 100};
  std::vector<int> pservers = {10};
  int steps = 500;  // per trainer per pass: four tasks of 125 steps
  int batch = 4;    // records a step (the control plane reads no more)
  int step_ms = 100;
  int lease_ttl = 10;
  double window_s = 10;  // the steady window
  bool kill_pserver = true;
  bool churn = true;
  bool kill_master = true;  // a standby master is started beside the leader, and the leader killed
  bool smoke = false;       // make test: check, do not report
  int long_passes = 0;      // > 0: the long run instead of the sizes (etcd's database over the passes)
  std::string etcd_retention = spec::kEtcdHistoryRetention;  // of etcd's history (auto-compaction)
  int etcd_members = 1;                                      // 3: a cluster on loopback
  int clients_per_connection = 1;  // clients sharing one connection (coord/connection_sharing.h)
  int trainers_per_process = 250;  // 0: the trainers are threads of this process
  bool given_ids = false;          // trainer ids given, as by a launcher; else claimed
  bool deadlock_checks = false;    // absl's, on in every process (off in real ones: deadlock_checks.h)
  std::string json_path;
};

// The etcd the job uses: one member, or a cluster's members.
struct EtcdUnderTest {
  std::vector<std::string> endpoints;  // host:port
  std::vector<pid_t> pids;
  // As a --etcd flag takes them.
  std::string list() const { return Join(endpoints, ","); }
  // The CPU seconds its members used so far.
  double CpuSeconds() const;
  // The client connections its members hold.
  int Connections() const;
};

// One size: a fresh job in the etcd, its data set, pservers, master and trainers.
class Run {
 public:
  Run(const SimOptions& o, EtcdUnderTest etcd, std::string dir, int n, int p)
      : o_(o),
        server_(std::move(etcd)),
        dir_(std::move(dir)),
        n_(n),
        p_(p),
        job_("sim-" + NewUuid().substr(0, 6)) {}
  ~Run() {
    fleet_.reset();
    pservers_.clear();
    if (master_) master_->Terminate(std::chrono::seconds(5));
    if (standby_) standby_->Terminate(std::chrono::seconds(5));
  }

  StatusOr<Json> Go();
  // The long run: the pass after pass of a small job, etcd's database size at every fifth pass.
  StatusOr<Json> Long(int passes);

 private:
  Status CreateJob();
  Status StartPservers();
  // The leading master; with o_.kill_master, once it leads, a standby beside it.
  Status StartMasters();
  StatusOr<std::unique_ptr<Process>> StartMaster(int http_port);
  Status StartTrainers(int count);
  // What etcd serves a second with no trainer yet: the pservers' and masters' share, which
  // the steady window's per-trainer figure then leaves out ("etcd_fixed_per_s").
  Status FixedLoad(Json* out);
  // All N trainers started at once, until each has its first record.
  Status JoinStorm(Json* out);
  Status SteadyWindow(Json* out);
  // The first trainer's error, or the master's exit.
  Status FirstError() const;
  StatusOr<Json> KillAPserver();
  StatusOr<Json> Churn();
  StatusOr<Json> KillTheMaster();

  const SimOptions& o_;
  const EtcdUnderTest server_;
  const std::string dir_;
  const int n_, p_;
  const std::string job_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::vector<std::unique_ptr<SimPserver>> pservers_;
  std::unique_ptr<TrainerFleet> fleet_;
  std::unique_ptr<Process> master_, standby_;
  int master_http_ = FreeLoopbackPort(), standby_http_ = FreeLoopbackPort();
  double fixed_requests_per_s_ = 0;
};

}  // namespace tessera::bench
