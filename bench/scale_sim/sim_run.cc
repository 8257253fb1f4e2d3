// One size of scale_sim, every scenario (see sim_run.h).
#include "sim_run.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "client/job_connection.h"
#include "client/master_client.h"
#include "common/clock.h"
#include "common/net.h"
#include "common/random.h"
#include "common/strings.h"
#include "dataset/dataset.h"
#include "etcd_load.h"
#include "harness/ports.h"
#include "harness/subprocess.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "proc_stats.h"
#include "security/job_secret.h"

namespace tessera::bench {
namespace {

using testing::BuildPath;

// The /metrics page at host:port.
StatusOr<std::string> Metrics(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  httplib::Client http(endpoint.substr(0, colon), std::stoi(endpoint.substr(colon + 1)));
  http.set_read_timeout(10, 0);
  auto r = http.Get("/metrics");
  if (!r || r->status != 200) return Status::Unavailable("cannot read /metrics at " + endpoint);
  return r->body;
}

// The etcd's load now: the requests its members served, summed; the database, one member's
// (every member holds the same data).
StatusOr<EtcdLoad> ReadLoad(const EtcdUnderTest& etcd) {
  EtcdLoad sum;
  double db = 0, in_use = 0;
  for (const auto& e : etcd.endpoints) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, Metrics(e));
    TESSERA_ASSIGN_OR_RETURN(EtcdLoad member, ParseEtcdLoad(text));
    sum = Sum(sum, member);
    db = std::max(db, member.db_bytes);
    in_use = std::max(in_use, member.db_in_use_bytes);
  }
  sum.db_bytes = db;
  sum.db_in_use_bytes = in_use;
  return sum;
}

// The master's RPCs handled so far, by method.
StatusOr<std::map<std::string, double>> MasterRpcs(const std::string& endpoint) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, Metrics(endpoint));
  return CountsByLabel(text, "tessera_master_rpc_seconds_count", "method");
}

// Waits until `done()` or `timeout`; returns the seconds it took, or -1 at the timeout.
double SecondsUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto start = Now();
  // Bounded by the timeout; checked every 20 ms.
  while (!done()) {
    if (Now() - start > timeout) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::chrono::duration<double>(Now() - start).count();
}

// The pass a job's master is in.
class JobConnectionProbe {
 public:
  JobConnectionProbe(etcd::EtcdClient* etcd, std::string endpoint, std::string job)
      : etcd_(etcd), endpoint_(std::move(endpoint)), job_(std::move(job)) {}
  StatusOr<int> Pass() {
    if (!master_) {
      TESSERA_ASSIGN_OR_RETURN(auto token, ReadJobToken());
      master_ = std::make_unique<master::MasterClient>(etcd_, job_, token.first, token.second);
    }
    TESSERA_ASSIGN_OR_RETURN(auto st, master_->GetStatus(Deadline(std::chrono::seconds(10))));
    return st.pass();
  }

 private:
  StatusOr<std::pair<std::string, security::JobSecret>> ReadJobToken() {
    ConnectionOptions c;
    c.etcd_endpoints = Split(endpoint_, ',');
    c.job = job_;
    TESSERA_ASSIGN_OR_RETURN(JobConnection j, ConnectJob(c, std::chrono::seconds(10)));
    return std::make_pair(j.config.token, j.secret);
  }
  etcd::EtcdClient* etcd_;
  const std::string endpoint_, job_;
  std::unique_ptr<master::MasterClient> master_;
};

}  // namespace

double EtcdUnderTest::CpuSeconds() const {
  double sum = 0;
  for (pid_t p : pids) sum += ::tessera::bench::CpuSeconds(p);
  return sum;
}

int EtcdUnderTest::Connections() const {
  int n = 0;
  for (const auto& e : endpoints) n += testing::ConnectionsTo(std::stoi(e.substr(e.rfind(':') + 1)));
  return n;
}

Status Run::CreateJob() {
  etcd::EtcdOptions eo;
  eo.endpoints = server_.endpoints;
  TESSERA_ASSIGN_OR_RETURN(etcd_, etcd::EtcdClient::Create(eo));
  JobConfig cfg;
  cfg.pservers = p_;
  TESSERA_ASSIGN_OR_RETURN(cfg.mode, ConsistencyMode::Parse("async"));
  cfg.token = NewUuid();
  TESSERA_RETURN_IF_ERROR(etcd_->Commit(CreateJobTxn(job_, &cfg, security::JobSecret::Generate())).status());
  // Four tasks a trainer a pass, one chunk each.
  const int64_t per_task = std::max<int64_t>(1, int64_t{o_.steps} * o_.batch / 4);
  // Records long enough that a task's fill a chunk of at least the writer's least (1 KiB).
  const std::string record(static_cast<size_t>(std::max<int64_t>(1, 1200 / per_task)), 'r');
  dataset::WriterOptions wo;
  wo.chunk_bytes =
      static_cast<size_t>(std::max<int64_t>(1024, per_task * static_cast<int64_t>(record.size() + 5)));
  wo.compressor = recordio::Compressor::kNone;
  TESSERA_ASSIGN_OR_RETURN(auto w, dataset::DatasetWriter::Create(dir_ + "/store", job_, "text", "line", wo));
  const int64_t records = per_task * 4 * n_;
  for (int64_t i = 0; i < records; ++i) TESSERA_RETURN_IF_ERROR(w->Add(record));
  return w->Commit(Json::object());
}

Status Run::StartPservers() {
  std::vector<StatusOr<std::unique_ptr<SimPserver>>> started;
  for (int i = 0; i < p_; ++i) started.emplace_back(Status::Unknown("not started"));
  std::vector<std::thread> threads;
  for (int i = 0; i < p_; ++i)
    threads.emplace_back([&, i] {
      started[i] = SimPserver::Start({server_.list(), job_, p_, i, o_.lease_ttl});
    });
  for (auto& t : threads) t.join();
  for (auto& s : started) {
    TESSERA_RETURN_IF_ERROR(s.status());
    pservers_.push_back(std::move(*s));
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<Process>> Run::StartMaster(int http_port) {
  testing::SpawnOptions so;
  so.argv = {BuildPath("src/tessera"),
             "master",
             "--etcd",
             server_.list(),
             "--job",
             job_,
             "--store",
             dir_ + "/store",
             "--dataset",
             job_,
             "--passes",
             "1000",
             "--chunks-per-task",
             "1",
             "--lease-ttl",
             std::to_string(o_.lease_ttl),
             "--http-port",
             std::to_string(http_port),
             "--log-level",
             "warn"};
  so.log_path = dir_ + "/" + job_ + "-master-" + std::to_string(http_port) + ".log";
  return testing::Subprocess::Spawn(so);
}

Status Run::StartMasters() {
  TESSERA_ASSIGN_OR_RETURN(master_, StartMaster(master_http_));
  if (!o_.kill_master) return Status::OK();
  // The standby starts once the first leads: the job's status answers.
  JobConnectionProbe probe(etcd_.get(), server_.list(), job_);
  const double led =
      SecondsUntil([&] { return probe.Pass().ok() || !master_->running(); }, std::chrono::seconds(60));
  TESSERA_RETURN_IF_ERROR(FirstError());
  if (led < 0) return Status::DeadlineExceeded("the master did not lead within 60 s");
  TESSERA_ASSIGN_OR_RETURN(standby_, StartMaster(standby_http_));
  return Status::OK();
}

Status Run::StartTrainers(int count) {
  if (fleet_) return fleet_->Start(count);
  FleetOptions f;
  f.per_process = o_.trainers_per_process;
  f.given_ids = o_.given_ids;
  f.dir = dir_;
  f.host_binary = BuildPath("bench/scale_sim_host");
  f.clients_per_connection = o_.clients_per_connection;
  f.deadlock_checks = o_.deadlock_checks;
  SimTrainerOptions& t = f.trainer;
  t.etcd = server_.list();
  t.job = job_;
  t.store = dir_ + "/store";
  t.pservers = p_;
  t.lease_ttl_seconds = o_.lease_ttl;
  t.batch = o_.batch;
  t.step = std::chrono::milliseconds(o_.step_ms);
  fleet_ = std::make_unique<TrainerFleet>(f);
  return fleet_->Start(count);
}

Status Run::FirstError() const {
  if (master_ && !master_->running())
    return Status::Aborted("the master exited; its output: " + master_->Output());
  return fleet_ ? fleet_->FirstError() : Status::OK();
}

// Kills pserver 0 (as kill -9: its lease is no longer kept) and starts its replacement, which
// claims the index once the old key expires; the seconds until every trainer's directory shows
// the replacement, and the watch events etcd sent meanwhile per trainer.
StatusOr<Json> Run::KillAPserver() {
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad before, ReadLoad(server_));
  const int64_t old_epoch = pservers_[0]->epoch();
  const auto killed = Now();
  pservers_[0]->Crash();
  TESSERA_ASSIGN_OR_RETURN(auto replacement,
                           SimPserver::Start({server_.list(), job_, p_, 0, o_.lease_ttl,
                                              std::chrono::seconds(o_.lease_ttl * 3 + 10)}));
  const int64_t new_epoch = replacement->epoch();
  const double moved = SecondsUntil(
      [&] {
        for (size_t i = 0; i < fleet_->size(); ++i)
          if (!(*fleet_)[i].ended() && (*fleet_)[i].pserver0_epoch.load() != new_epoch) return false;
        return true;
      },
      std::chrono::seconds(o_.lease_ttl * 3 + 30));
  const double since_kill = moved < 0 ? -1 : std::chrono::duration<double>(Now() - killed).count();
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad after, ReadLoad(server_));
  pservers_[0] = std::move(replacement);
  if (old_epoch == new_epoch) return Status::Internal("the replacement kept the old epoch");
  return Json{{"moved_s", since_kill},
              {"watch_events_per_trainer", (after["watch_events"] - before["watch_events"]) / n_}};
}

// A tenth of the trainers leave; as many new ones join: the seconds until every newcomer trains.
StatusOr<Json> Run::Churn() {
  const int k = std::max(1, n_ / 10);
  TrainerFleet& fleet = *fleet_;
  for (int i = 0; i < k; ++i) fleet.RequestStop(i);
  const double left = SecondsUntil(
      [&] {
        for (int i = 0; i < k; ++i)
          if (!fleet[i].ended()) return false;
        return true;
      },
      std::chrono::seconds(60));
  if (left < 0) return Status::DeadlineExceeded("the leaving trainers did not end within 60 s");
  const size_t first_new = fleet.size();
  TESSERA_RETURN_IF_ERROR(StartTrainers(k));
  const double s = SecondsUntil(
      [&] {
        for (size_t i = first_new; i < fleet.size(); ++i)
          if (!fleet[i].training() && !fleet[i].ended()) return false;
        return true;
      },
      std::chrono::seconds(60 + n_ / 10));
  return Json{{"left_and_joined", k}, {"newcomers_training_s", s}};
}

// Kills the leading master (SIGKILL: its election key stays until its lease expires). The
// standby leads then, replays the task log and serves: the seconds until it has handled a task
// call, and until every trainer has had a task acknowledged since the kill (a trainer finishes
// the tasks it holds meanwhile, so this includes up to one task's time).
StatusOr<Json> Run::KillTheMaster() {
  std::vector<int64_t> done_before, records_before, left_before;
  int64_t stale_before = 0;
  const TrainerFleet& fleet = *fleet_;
  for (size_t i = 0; i < fleet.size(); ++i) {
    done_before.push_back(fleet[i].tasks_done.load());
    records_before.push_back(fleet[i].records.load());
    left_before.push_back(fleet[i].task_left.load());
    stale_before += fleet[i].tasks_stale.load();
  }
  const auto killed = Now();
  master_->Kill();
  auto since_kill = [&](double waited) {  // each wait started after the one before ended
    return waited < 0 ? -1 : std::chrono::duration<double>(Now() - killed).count();
  };
  const std::string standby_http = "127.0.0.1:" + std::to_string(standby_http_);
  const auto deadline = std::chrono::seconds(o_.lease_ttl * 3 + 60);
  const double serving = SecondsUntil(
      [&] {
        auto rpcs = MasterRpcs(standby_http);
        return rpcs.ok() && ((*rpcs)["GetTask"] > 0 || (*rpcs)["FinishTask"] > 0);
      },
      deadline);
  const double serving_s = since_kill(serving);
  // When each trainer's first acknowledgement since the kill came, in seconds from the kill.
  std::vector<double> acked(done_before.size(), -1);
  const double every_trainer = SecondsUntil(
      [&] {
        bool all = true;
        for (size_t i = 0; i < done_before.size(); ++i) {
          if (acked[i] >= 0 || fleet[i].ended()) continue;
          if (fleet[i].tasks_done.load() > done_before[i]) {
            acked[i] = std::chrono::duration<double>(Now() - killed).count();
          } else {
            all = false;
          }
        }
        return all;
      },
      deadline);
  std::vector<double> seen;
  for (double a : acked)
    if (a >= 0) seen.push_back(a);
  std::sort(seen.begin(), seen.end());
  const double median_acked = seen.empty() ? -1 : seen[seen.size() / 2];
  // How much later than it could have been each trainer's acknowledgement came: not before the
  // standby serves, nor before the task it held at the kill was read to its end (its records left
  // at the step-rate). The late ones are what the model misses.
  std::vector<double> late;
  const double records_per_s = 1000.0 * o_.batch / std::max(1, o_.step_ms);
  for (size_t i = 0; i < acked.size(); ++i) {
    if (acked[i] < 0 || left_before[i] < 0) continue;
    const double earliest = std::max(serving_s, static_cast<double>(left_before[i]) / records_per_s);
    late.push_back(acked[i] - earliest);
  }
  std::sort(late.begin(), late.end());
  const Json lateness =
      late.empty()
          ? Json::object()
          : Json{{"median_s", late[late.size() / 2]},
                 {"max_s", late.back()},
                 {"over_3s", std::count_if(late.begin(), late.end(), [](double l) { return l > 3; })}};
  const double acked_s = since_kill(every_trainer);
  int64_t stale = -stale_before;
  for (size_t i = 0; i < fleet.size(); ++i) stale += fleet[i].tasks_stale.load();
  // The trainers still without an acknowledgement at the deadline, and how many of them read
  // records since the kill (training, but their tasks not acknowledged) or none (given nothing).
  int not_acked = 0, not_acked_reading = 0;
  for (size_t i = 0; i < acked.size(); ++i) {
    if (acked[i] >= 0 || fleet[i].ended()) continue;
    ++not_acked;
    if (fleet[i].records.load() > records_before[i]) ++not_acked_reading;
  }
  master_ = std::move(standby_);
  std::swap(master_http_, standby_http_);
  TESSERA_RETURN_IF_ERROR(FirstError());
  return Json{{"standby_serving_s", serving_s},
              {"median_trainer_acked_s", median_acked},
              {"every_trainer_acked_s", acked_s},
              {"trainers_not_acked", not_acked},
              {"ack_later_than_possible", lateness},
              {"trainers_not_acked_but_reading", not_acked_reading},
              {"acks_refused_per_trainer", static_cast<double>(stale) / static_cast<double>(fleet.size())}};
}

StatusOr<Json> Run::Long(int passes) {
  TESSERA_RETURN_IF_ERROR(CreateJob());
  TESSERA_RETURN_IF_ERROR(StartPservers());
  TESSERA_RETURN_IF_ERROR(StartMasters());
  TESSERA_RETURN_IF_ERROR(StartTrainers(n_));
  etcd::EtcdClient* etcd = etcd_.get();
  JobConnectionProbe probe(etcd, server_.list(), job_);
  Json sizes = Json::array();
  int next = 5;
  const auto start = Now();
  // Bounded by the passes asked for and 20 s a pass.
  while (next <= passes) {
    if (Now() - start > std::chrono::seconds(20) * passes)
      return Status::DeadlineExceeded("the long run did not reach pass " + std::to_string(next));
    TESSERA_RETURN_IF_ERROR(FirstError());
    auto pass = probe.Pass();
    if (pass.ok() && *pass >= next) {
      TESSERA_ASSIGN_OR_RETURN(EtcdLoad load, ReadLoad(server_));
      TESSERA_ASSIGN_OR_RETURN(auto rev, etcd->Get("/", {}));
      // What is live now: every key and its value (the rest of the database is history).
      etcd::GetOptions all;
      all.prefix = true;
      TESSERA_ASSIGN_OR_RETURN(auto live, etcd->Get("/", all));
      double live_bytes = 0;
      std::map<std::string, double> by_prefix;  // what the live bytes are: /tessera/<job>/<kind>
      for (const auto& kv : live.kvs) {
        const double bytes = static_cast<double>(kv.key.size() + kv.value.size());
        live_bytes += bytes;
        size_t cut = 0;
        for (int slashes = 0; slashes < 4 && cut != std::string::npos; ++slashes)
          cut = kv.key.find('/', cut + 1);
        by_prefix[kv.key.substr(0, cut)] += bytes;
      }
      sizes.push_back({{"pass", *pass},
                       {"db_mib", load.db_bytes / (1 << 20)},
                       {"db_in_use_mib", load.db_in_use_bytes / (1 << 20)},
                       {"revision", rev.revision},
                       {"compacted_revision", load.compacted_revision},
                       {"compactions", load.compactions},
                       {"live_keys", live.kvs.size()},
                       {"live_mib", live_bytes / (1 << 20)},
                       {"live_bytes_by_prefix", by_prefix},
                       {"seconds", std::chrono::duration<double>(Now() - start).count()}});
      std::fprintf(stderr,
                   "pass %d: etcd DB %.2f MiB (%.2f in use), revision %lld (compacted to %.0f, %.0f "
                   "compactions), %zu live keys of %.3f MiB\n",
                   *pass, load.db_bytes / (1 << 20), load.db_in_use_bytes / (1 << 20),
                   static_cast<long long>(rev.revision), load.compacted_revision, load.compactions,
                   live.kvs.size(), live_bytes / (1 << 20));
      next += 5;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Json{{"trainers", n_}, {"pservers", p_}, {"passes", sizes}};
}

Status Run::FixedLoad(Json* out) {
  const double seconds = std::min(5.0, o_.window_s);
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad before, ReadLoad(server_));
  const auto t0 = Now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad after, ReadLoad(server_));
  fixed_requests_per_s_ =
      RatesBetween(before, after, std::chrono::duration<double>(Now() - t0).count()).requests();
  (*out)["etcd_fixed_per_s"] = fixed_requests_per_s_;
  // The connections held before any trainer: the pservers', the masters', this process's, and
  // each etcd member's own (its HTTP gateway dials the member's gRPC port).
  (*out)["etcd_connections_fixed"] = server_.Connections();
  return Status::OK();
}

Status Run::JoinStorm(Json* out) {
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad before_join, ReadLoad(server_));
  const double cpu_join[] = {CpuSeconds(::getpid()), server_.CpuSeconds(), CpuSeconds(master_->pid())};
  TESSERA_RETURN_IF_ERROR(StartTrainers(n_));
  const TrainerFleet& fleet = *fleet_;
  const double joined = SecondsUntil(
      [&] {
        for (size_t i = 0; i < fleet.size(); ++i)
          if (!fleet[i].training() && !fleet[i].ended()) return false;
        return true;
      },
      std::chrono::seconds(120 + n_ / 5));
  TESSERA_RETURN_IF_ERROR(FirstError());
  if (joined < 0) return Status::DeadlineExceeded("not every trainer trained within the join storm's time");
  (*out)["join_storm_s"] = joined;
  {
    // What the storm asked of etcd, per trainer.
    TESSERA_ASSIGN_OR_RETURN(EtcdLoad after_join, ReadLoad(server_));
    const EtcdLoad per = RatesBetween(before_join, after_join, n_);
    Json kinds = Json::object();
    for (const auto& [kind, v] : per.counts)
      if (v > 0) kinds[kind] = v;
    (*out)["join_etcd_per_trainer"] = kinds;
    // The CPU the storm took, per trainer, in milliseconds: the simulated trainers' own (their
    // processes and this one, whose pservers' threads are busy too), etcd's and the master's. On
    // this machine they share its cores; in a cluster only etcd's and the master's are shared.
    // (The hosts started with the storm: their CPU is all the storm's.)
    (*out)["join_cpu_ms_per_trainer"] = {{"trainers", 1000 * (fleet.CpuSeconds() - cpu_join[0]) / n_},
                                         {"etcd", 1000 * (server_.CpuSeconds() - cpu_join[1]) / n_},
                                         {"master", 1000 * (CpuSeconds(master_->pid()) - cpu_join[2]) / n_}};
  }
  // Where the join's time went: when the last trainer ended each phase, from the storm's start.
  Json phases = Json::object();
  const char* names[] = {"connected", "registered", "pservers_ready", "reader_open"};
  for (int ph = 0; ph < SimTrainer::kPhases; ++ph) {
    int64_t last = 0;
    for (size_t i = 0; i < fleet.size(); ++i) last = std::max(last, fleet[i].phase_ms[ph].load());
    phases[names[ph]] = static_cast<double>(last - fleet[0].started_ms.load()) / 1000.0;
  }
  int64_t first = 0;
  for (size_t i = 0; i < fleet.size(); ++i) first = std::max(first, fleet[i].first_record_ms.load());
  phases["first_record"] = static_cast<double>(first - fleet[0].started_ms.load()) / 1000.0;
  (*out)["trainer_processes"] = fleet.processes();
  (*out)["join_phases_s"] = phases;
  return Status::OK();
}

Status Run::SteadyWindow(Json* out) {
  const std::string master_http = "127.0.0.1:" + std::to_string(master_http_);
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad before, ReadLoad(server_));
  TESSERA_ASSIGN_OR_RETURN(auto rpcs0, MasterRpcs(master_http));
  const double cpu0 = CpuSeconds(master_->pid());
  const auto t0 = Now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o_.window_s));
  const double seconds = std::chrono::duration<double>(Now() - t0).count();
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad after, ReadLoad(server_));
  const double cpu1 = CpuSeconds(master_->pid());
  TESSERA_ASSIGN_OR_RETURN(auto rpcs1, MasterRpcs(master_http));
  TESSERA_RETURN_IF_ERROR(FirstError());
  Json methods = Json::object();
  double all_rpcs = 0;
  for (const auto& [method, v] : rpcs1) {
    auto was = rpcs0.find(method);
    const double rate = (v - (was == rpcs0.end() ? 0 : was->second)) / seconds;
    if (rate > 0) methods[method] = rate;
    all_rpcs += rate;
  }
  (*out)["master_rpcs_per_s"] = methods;
  (*out)["master_rpcs_per_trainer_s"] = all_rpcs / n_;
  const EtcdLoad rate = RatesBetween(before, after, seconds);
  Json kinds = Json::object();
  for (const auto& [kind, v] : rate.counts) kinds[kind] = v;
  (*out)["etcd_per_s"] = kinds;
  (*out)["etcd_requests_per_trainer_s"] = rate.requests() / n_;
  // The trainers' own share: what etcd served beyond the pservers' and masters' load before they
  // came (those stay the same whatever N is).
  (*out)["etcd_trainer_requests_per_trainer_s"] = (rate.requests() - fixed_requests_per_s_) / n_;
  (*out)["master_cpu_pct"] = 100 * (cpu1 - cpu0) / seconds;
  (*out)["master_rss_mib"] = ResidentMiB(master_->pid());
  (*out)["etcd_db_mib"] = after.db_bytes / (1 << 20);
  (*out)["etcd_connections"] = server_.Connections();
  return Status::OK();
}

StatusOr<Json> Run::Go() {
  TESSERA_RETURN_IF_ERROR(CreateJob());
  TESSERA_RETURN_IF_ERROR(StartPservers());
  TESSERA_RETURN_IF_ERROR(StartMasters());
  Json out = {{"trainers", n_},
              {"pservers", p_},
              {"step_ms", o_.step_ms},
              {"lease_ttl", o_.lease_ttl},
              {"trainer_ids", o_.given_ids ? "given" : "claimed"}};
  TESSERA_RETURN_IF_ERROR(FixedLoad(&out));
  TESSERA_RETURN_IF_ERROR(JoinStorm(&out));
  TESSERA_RETURN_IF_ERROR(SteadyWindow(&out));
  // The faults, one after another: one that does not settle is recorded, and ends the run
  // (what follows would measure a job already broken).
  const std::pair<const char*, std::function<StatusOr<Json>()>> faults[] = {
      {"pserver_killed", [&] { return o_.kill_pserver ? KillAPserver() : StatusOr<Json>(Json()); }},
      {"churn", [&] { return o_.churn ? Churn() : StatusOr<Json>(Json()); }},
      {"master_killed", [&] { return o_.kill_master ? KillTheMaster() : StatusOr<Json>(Json()); }}};
  for (const auto& [name, fault] : faults) {
    auto r = fault();
    if (r.ok()) r = FirstError().ok() ? r : StatusOr<Json>(FirstError());
    if (!r.ok()) {
      out[name] = {{"error", r.status().ToString()}};
      std::fprintf(stderr, "scale_sim: %d trainers, %d pservers: %s: %s\n", n_, p_, name,
                   r.status().ToString().c_str());
      break;
    }
    if (!r->is_null()) out[name] = *r;
  }
  return out;
}

}  // namespace tessera::bench
