// scale_sim: the control plane of a job with N trainers and P pservers, on this machine. A real
// etcd, the real master (`tessera master`), and N trainers and P pservers that run the real
// coordination code (sim_trainer.h, sim_pserver.h) with the data plane and the compute replaced
// by a sleep per step. The trainers and pservers are threads of this process, each with the etcd
// connections its process would have: the coordination code blocks (gRPC calls, watches, lease
// keepers each on a thread), so threads run it unchanged, and N = 1,000 is some 8,000 threads
// that mostly sleep.
//
// Scenarios, in one run for each size: the join storm (all N trainers started at once: time until
// every one has its first record), a steady window of the pass (etcd's requests per second by
// kind, the master's CPU and memory), a pserver killed (its lease no longer kept; a replacement
// waits for the index: time until every trainer's directory shows it), and a tenth of the
// trainers leaving and coming back (time until the newcomers train). Prints a Markdown row per
// size, and with --json one JSON object per size.
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "client/job_connection.h"
#include "client/master_client.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/net.h"
#include "common/random.h"
#include "coord/etcd_client.h"
#include "dataset/dataset.h"
#include "etcd_load.h"
#include "harness/etcd_server.h"
#include "harness/subprocess.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "security/job_secret.h"
#include "sim_pserver.h"
#include "sim_trainer.h"
#include "spec/role_argv.h"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;
using testing::BuildPath;

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
  bool smoke = false;  // make test: check, do not report
  int long_passes = 0;  // > 0: the long run instead of the sizes (etcd's database over the passes)
  std::string etcd_retention = spec::kEtcdHistoryRetention;  // of etcd's history (auto-compaction)
  std::string json_path;
};

// The /metrics page at host:port.
StatusOr<std::string> Metrics(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  httplib::Client http(endpoint.substr(0, colon), std::stoi(endpoint.substr(colon + 1)));
  http.set_read_timeout(10, 0);
  auto r = http.Get("/metrics");
  if (!r || r->status != 200) return Status::Unavailable("cannot read /metrics at " + endpoint);
  return r->body;
}

// The etcd member's load now.
StatusOr<EtcdLoad> ReadLoad(const std::string& endpoint) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, Metrics(endpoint));
  return ParseEtcdLoad(text);
}

// The master's RPCs handled so far, by method.
StatusOr<std::map<std::string, double>> MasterRpcs(const std::string& endpoint) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, Metrics(endpoint));
  return CountsByLabel(text, "tessera_master_rpc_seconds_count", "method");
}

// A process's CPU seconds (user + system) from /proc/PID/stat, or -1.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; fields >> f; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stod(f);
    if (i == 15) {
      stime = std::stod(f);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A process's resident memory in MiB, or -1.
double ResidentMiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  return -1;
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
    c.etcd_endpoints = {endpoint_};
    c.job = job_;
    TESSERA_ASSIGN_OR_RETURN(JobConnection j, ConnectJob(c, std::chrono::seconds(10)));
    return std::make_pair(j.config.token, j.secret);
  }
  etcd::EtcdClient* etcd_;
  const std::string endpoint_, job_;
  std::unique_ptr<master::MasterClient> master_;
};

// One size: a fresh job in the etcd, its data set, pservers, master and trainers.
class Run {
 public:
  Run(const SimOptions& o, testing::EtcdServer* etcd, std::string dir, int n, int p)
      : o_(o), server_(etcd), dir_(std::move(dir)), n_(n), p_(p), job_("sim-" + NewUuid().substr(0, 6)) {}
  ~Run() {
    for (auto& t : trainers_) t->Stop();
    trainers_.clear();
    pservers_.clear();
    if (master_) master_->Terminate(std::chrono::seconds(5));
  }

  StatusOr<Json> Go();
  // The long run: the pass after pass of a small job, etcd's database size at every fifth pass.
  StatusOr<Json> Long(int passes);

 private:
  Status CreateJob();
  Status StartPservers();
  Status StartMaster();
  void StartTrainers(int count);
  Status FirstError() const;
  StatusOr<Json> KillAPserver();
  StatusOr<Json> Churn();

  const SimOptions& o_;
  testing::EtcdServer* server_;
  const std::string dir_;
  const int n_, p_;
  const std::string job_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::vector<std::unique_ptr<SimPserver>> pservers_;
  std::vector<std::unique_ptr<SimTrainer>> trainers_;
  std::unique_ptr<testing::Subprocess> master_;
  const int master_http_ = FreeLoopbackPort();
};

Status Run::CreateJob() {
  etcd::EtcdOptions eo;
  eo.endpoints = {server_->endpoint()};
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
      started[i] = SimPserver::Start({server_->endpoint(), job_, p_, i, o_.lease_ttl});
    });
  for (auto& t : threads) t.join();
  for (auto& s : started) {
    TESSERA_RETURN_IF_ERROR(s.status());
    pservers_.push_back(std::move(*s));
  }
  return Status::OK();
}

Status Run::StartMaster() {
  testing::SpawnOptions so;
  so.argv = {BuildPath("src/tessera"),
             "master",
             "--etcd",
             server_->endpoint(),
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
             std::to_string(master_http_),
             "--log-level",
             "warn"};
  so.log_path = dir_ + "/" + job_ + "-master.log";
  TESSERA_ASSIGN_OR_RETURN(master_, testing::Subprocess::Spawn(so));
  return Status::OK();
}

void Run::StartTrainers(int count) {
  SimTrainerOptions t;
  t.etcd = server_->endpoint();
  t.job = job_;
  t.store = dir_ + "/store";
  t.pservers = p_;
  t.lease_ttl_seconds = o_.lease_ttl;
  t.batch = o_.batch;
  t.step = std::chrono::milliseconds(o_.step_ms);
  for (int i = 0; i < count; ++i) {
    trainers_.push_back(std::make_unique<SimTrainer>(t));
    trainers_.back()->Start();
  }
}

Status Run::FirstError() const {
  for (const auto& t : trainers_)
    if (t->done() && !t->error().ok()) return t->error();
  return Status::OK();
}

// Kills pserver 0 (as kill -9: its lease is no longer kept) and starts its replacement, which
// claims the index once the old key expires; the seconds until every trainer's directory shows
// the replacement, and the watch events etcd sent meanwhile per trainer.
StatusOr<Json> Run::KillAPserver() {
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad before, ReadLoad(server_->endpoint()));
  const int64_t old_epoch = pservers_[0]->epoch();
  const auto killed = Now();
  pservers_[0]->Crash();
  TESSERA_ASSIGN_OR_RETURN(auto replacement,
                           SimPserver::Start({server_->endpoint(), job_, p_, 0, o_.lease_ttl,
                                              std::chrono::seconds(o_.lease_ttl * 3 + 10)}));
  const int64_t new_epoch = replacement->epoch();
  const double moved = SecondsUntil(
      [&] {
        for (const auto& t : trainers_)
          if (!t->done() && t->PserverEpoch(0) != new_epoch) return false;
        return true;
      },
      std::chrono::seconds(o_.lease_ttl * 3 + 30));
  const double since_kill = moved < 0 ? -1 : std::chrono::duration<double>(Now() - killed).count();
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad after, ReadLoad(server_->endpoint()));
  pservers_[0] = std::move(replacement);
  if (old_epoch == new_epoch) return Status::Internal("the replacement kept the old epoch");
  return Json{{"moved_s", since_kill},
              {"watch_events_per_trainer", (after["watch_events"] - before["watch_events"]) / n_}};
}

// A tenth of the trainers leave; as many new ones join: the seconds until every newcomer trains.
StatusOr<Json> Run::Churn() {
  const int k = std::max(1, n_ / 10);
  for (int i = 0; i < k; ++i) trainers_[i]->Stop();
  for (int i = 0; i < k; ++i) trainers_[i]->Join();
  const size_t first_new = trainers_.size();
  StartTrainers(k);
  const double s = SecondsUntil(
      [&] {
        for (size_t i = first_new; i < trainers_.size(); ++i)
          if (!trainers_[i]->training() && !trainers_[i]->done()) return false;
        return true;
      },
      std::chrono::seconds(60 + n_ / 10));
  return Json{{"left_and_joined", k}, {"newcomers_training_s", s}};
}

StatusOr<Json> Run::Long(int passes) {
  TESSERA_RETURN_IF_ERROR(CreateJob());
  TESSERA_RETURN_IF_ERROR(StartPservers());
  TESSERA_RETURN_IF_ERROR(StartMaster());
  StartTrainers(n_);
  etcd::EtcdClient* etcd = etcd_.get();
  JobConnectionProbe probe(etcd, server_->endpoint(), job_);
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
      TESSERA_ASSIGN_OR_RETURN(EtcdLoad load, ReadLoad(server_->endpoint()));
      TESSERA_ASSIGN_OR_RETURN(auto rev, etcd->Get("/", {}));
      // What is live now: every key and its value (the rest of the database is history).
      etcd::GetOptions all;
      all.prefix = true;
      TESSERA_ASSIGN_OR_RETURN(auto live, etcd->Get("/", all));
      double live_bytes = 0;
      for (const auto& kv : live.kvs) live_bytes += static_cast<double>(kv.key.size() + kv.value.size());
      sizes.push_back({{"pass", *pass},
                       {"db_mib", load.db_bytes / (1 << 20)},
                       {"db_in_use_mib", load.db_in_use_bytes / (1 << 20)},
                       {"revision", rev.revision},
                       {"live_keys", live.kvs.size()},
                       {"live_mib", live_bytes / (1 << 20)},
                       {"seconds", std::chrono::duration<double>(Now() - start).count()}});
      std::fprintf(stderr,
                   "pass %d: etcd DB %.2f MiB (%.2f in use), revision %lld, %zu live keys of %.3f MiB\n",
                   *pass, load.db_bytes / (1 << 20), load.db_in_use_bytes / (1 << 20),
                   static_cast<long long>(rev.revision), live.kvs.size(), live_bytes / (1 << 20));
      next += 5;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Json{{"trainers", n_}, {"pservers", p_}, {"passes", sizes}};
}

StatusOr<Json> Run::Go() {
  TESSERA_RETURN_IF_ERROR(CreateJob());
  TESSERA_RETURN_IF_ERROR(StartPservers());
  TESSERA_RETURN_IF_ERROR(StartMaster());
  Json out = {{"trainers", n_}, {"pservers", p_}, {"step_ms", o_.step_ms}, {"lease_ttl", o_.lease_ttl}};
  // The join storm.
  StartTrainers(n_);
  const double joined = SecondsUntil(
      [&] {
        for (const auto& t : trainers_)
          if (!t->training() && !t->done()) return false;
        return true;
      },
      std::chrono::seconds(120 + n_ / 5));
  TESSERA_RETURN_IF_ERROR(FirstError());
  if (joined < 0) return Status::DeadlineExceeded("not every trainer trained within the join storm's time");
  out["join_storm_s"] = joined;
  // Where the join's time went: when the last trainer ended each phase, from the storm's start.
  Json phases = Json::object();
  const char* names[] = {"connected", "registered", "pservers_ready", "reader_open"};
  for (int ph = 0; ph < SimTrainer::kPhases; ++ph) {
    int64_t last = 0;
    for (const auto& t : trainers_) last = std::max(last, t->phase_ms(static_cast<SimTrainer::Phase>(ph)));
    phases[names[ph]] = static_cast<double>(last - trainers_.front()->started_ms()) / 1000.0;
  }
  int64_t first = 0;
  for (const auto& t : trainers_) first = std::max(first, t->first_record_ms());
  phases["first_record"] = static_cast<double>(first - trainers_.front()->started_ms()) / 1000.0;
  out["join_phases_s"] = phases;
  // A steady window.
  const std::string master_http = "127.0.0.1:" + std::to_string(master_http_);
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad before, ReadLoad(server_->endpoint()));
  TESSERA_ASSIGN_OR_RETURN(auto rpcs0, MasterRpcs(master_http));
  const double cpu0 = CpuSeconds(master_->pid());
  const auto t0 = Now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o_.window_s));
  const double seconds = std::chrono::duration<double>(Now() - t0).count();
  TESSERA_ASSIGN_OR_RETURN(EtcdLoad after, ReadLoad(server_->endpoint()));
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
  out["master_rpcs_per_s"] = methods;
  out["master_rpcs_per_trainer_s"] = all_rpcs / n_;
  const EtcdLoad rate = RatesBetween(before, after, seconds);
  Json kinds = Json::object();
  for (const auto& [kind, v] : rate.counts) kinds[kind] = v;
  out["etcd_per_s"] = kinds;
  out["etcd_requests_per_trainer_s"] = rate.requests() / n_;
  out["master_cpu_pct"] = 100 * (cpu1 - cpu0) / seconds;
  out["master_rss_mib"] = ResidentMiB(master_->pid());
  out["etcd_db_mib"] = after.db_bytes / (1 << 20);
  if (o_.kill_pserver) {
    TESSERA_ASSIGN_OR_RETURN(out["pserver_killed"], KillAPserver());
  }
  if (o_.churn) {
    TESSERA_ASSIGN_OR_RETURN(out["churn"], Churn());
  }
  TESSERA_RETURN_IF_ERROR(FirstError());
  return out;
}

std::string Row(const Json& r) {
  char line[512];
  const Json& k = r.value("pserver_killed", Json::object());
  const Json& c = r.value("churn", Json::object());
  std::snprintf(line, sizeof line,
                "| %d | %d | %.2f | %.2f | %.0f | %.0f | %.0f | %.1f | %.0f | %.2f | %.2f | %.1f | %.1f |",
                r["trainers"].get<int>(), r["pservers"].get<int>(), r["join_storm_s"].get<double>(),
                r["etcd_requests_per_trainer_s"].get<double>(), r["etcd_per_s"].value("keepalive", 0.0),
                r["etcd_per_s"].value("txn", 0.0) + r["etcd_per_s"].value("put", 0.0),
                r["etcd_per_s"].value("range", 0.0), r["master_cpu_pct"].get<double>(),
                r["master_rss_mib"].get<double>(), r["etcd_db_mib"].get<double>(), k.value("moved_s", -1.0),
                k.value("watch_events_per_trainer", -1.0), c.value("newcomers_training_s", -1.0));
  return line;
}

int Main(int argc, char** argv) {
  SimOptions o;
  CLI::App app{
      "scale_sim: the control plane of N trainers and P pservers (real etcd, real master, simulated "
      "compute)"};
  app.add_option("--trainers", o.trainers, "trainer counts to run, each a size (e.g. 10,100,1000)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--pservers", o.pservers, "pserver counts to run with each trainer count")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--steps", o.steps, "steps per trainer per pass")->capture_default_str();
  app.add_option("--batch", o.batch, "records per step")->capture_default_str();
  app.add_option("--step-ms", o.step_ms, "the simulated step, in milliseconds")->capture_default_str();
  app.add_option("--lease-ttl", o.lease_ttl, "every lease's TTL, in seconds")->capture_default_str();
  app.add_option("--window", o.window_s, "seconds of the steady window")->capture_default_str();
  app.add_flag("--smoke", o.smoke, "a short run that checks every scenario (make test)");
  app.add_option("--json", o.json_path, "also write one JSON object per size to this file");
  app.add_option("--etcd-retention", o.etcd_retention,
                 "etcd's history kept before it is compacted, as the etcd a job starts keeps it "
                 "(spec::EtcdServerFlags); 0: never compacted, as before 2026-11-28")
      ->capture_default_str();
  app.add_option(
      "--long", o.long_passes,
      "instead of the sizes: the first --trainers and --pservers count run this many short passes, "
      "etcd's database size printed every 5 passes");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // a thousand trainers' task notes are not the figures
  if (o.smoke) {
    o.trainers = {10};
    o.pservers = {2};
    o.window_s = 2;
    o.lease_ttl = 3;
    o.steps = 200;
    o.batch = 32;
    o.step_ms = 20;
  }
  // Each simulated trainer holds some 4 connections (2 to etcd, 2 to the master), and the master
  // and etcd (started from here) as many: raise the descriptor limit to what is allowed.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);
  }
  auto dir = MakeTempDir("scale-sim-");
  if (!dir.ok()) return std::fprintf(stderr, "%s\n", dir.status().ToString().c_str()), 1;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { (void)RemoveAll(dir); }
  } cleanup{*dir};
  testing::EtcdServerOptions eo;
  if (o.etcd_retention != "0") eo.flags = spec::EtcdServerFlags(o.etcd_retention);
  auto server = testing::EtcdServer::Launch(eo);
  if (!server.ok()) return std::fprintf(stderr, "%s\n", server.status().ToString().c_str()), 1;
  if (o.long_passes > 0) {
    // Short passes: four tasks of 10 steps of 5 ms a trainer.
    o.steps = 40;
    o.step_ms = 5;
    Run run(o, server->get(), *dir, o.trainers.front(), o.pservers.front());
    auto r = run.Long(o.long_passes);
    if (!r.ok()) {
      std::fprintf(stderr, "scale_sim --long: %s\n", r.status().ToString().c_str());
      return 1;
    }
    std::printf("%s\n", r->dump(2).c_str());
    return 0;
  }
  std::printf(
      "| trainers | pservers | join storm (s) | etcd req/trainer/s | keep-alives/s | puts+txns/s | ranges/s "
      "| "
      "master CPU %% | master MiB | etcd DB MiB | pserver killed: moved (s) | watch events/trainer | churn: "
      "newcomers (s) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  std::ofstream json_out;
  if (!o.json_path.empty()) json_out.open(o.json_path);
  int code = 0;
  for (int p : o.pservers) {
    for (int n : o.trainers) {
      Run run(o, server->get(), *dir, n, p);
      auto r = run.Go();
      if (!r.ok()) {
        std::fprintf(stderr, "scale_sim: %d trainers, %d pservers: %s\n", n, p,
                     r.status().ToString().c_str());
        code = 1;
        continue;
      }
      std::printf("%s\n", Row(*r).c_str());
      std::fflush(stdout);
      if (json_out) json_out << r->dump() << "\n";
      if (o.smoke) {
        // Every scenario settled: the replacement reached every trainer, the newcomers trained.
        const double moved = (*r)["pserver_killed"]["moved_s"],
                     newcomers = (*r)["churn"]["newcomers_training_s"];
        if (moved < 0 || newcomers < 0 || (*r)["etcd_per_s"].value("keepalive", 0.0) <= 0) {
          std::fprintf(stderr, "scale_sim --smoke: a scenario did not settle: %s\n", r->dump().c_str());
          code = 1;
        }
      }
    }
  }
  return code;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) { return tessera::bench::Main(argc, argv); }
