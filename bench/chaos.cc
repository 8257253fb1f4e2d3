// chaos: does training survive faults? Runs the `mlp` on Fashion-MNIST with `tessera local`
// (2 pservers with checkpoints, 2 trainers, a standby master) twice: once fault-free, once under
// a seeded fault schedule that every few seconds kills -9 a random pserver, trainer or master,
// once stalls a pserver (SIGSTOP) past its lease TTL and resumes it, once corrupts a pserver's
// newest checkpoint just before killing it, once freezes a pserver for good (SIGSTOP, never
// resumed: the supervisor must replace it), and once poisons a push (a third trainer joins and
// pushes a NaN gradient, once through the client's check and once past it). Prints a Markdown
// report: accuracy of both
// runs, tasks done / failed, duplicate executions, each fault with its recovery time (from the
// fault until the job's step moved again), and whether any process crashed (a signal we did not
// send). Exit 0 when the accuracy is within 1 percentage point of the fault-free run and no task
// was lost. `make chaos` runs it; not part of `make test`.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <thread>

#include "bench_etcd.h"
#include "checkpoint/checkpoint_choice.h"
#include "checkpoint/checkpoint_file.h"
#include "client/master_client.h"
#include "common/clock.h"
#include "common/files.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "fashion_mnist.h"
#include "harness/job_probe.h"
#include "harness/subprocess.h"
#include "job/job_config.h"
#include "tessera/client.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
using testing::BuildPath;

struct Fault {
  double at_s = 0;
  std::string what;
  double recovery_s = -1;  // until the job's step moved again
};

struct RunResult {
  bool ok = false;
  nlohmann::json result;
  std::string output;
  std::vector<Fault> faults;
  int crashes = 0;
  std::vector<std::string> crash_lines;
  master::StatusReply last;  // the master's counters, as last seen while the job ran
};

// Masters of this run: `tessera master` processes whose command line names its etcd.
std::vector<int64_t> MasterPids(const std::string& endpoint) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto cmd = ReadFile(e.path().string() + "/cmdline");
    if (!cmd.ok()) continue;
    std::string c = *cmd;
    std::replace(c.begin(), c.end(), '\0', ' ');
    if (c.find(" master ") != std::string::npos && c.find(endpoint) != std::string::npos) {
      out.push_back(std::stoll(name));
    }
  }
  return out;
}

// A third trainer joins the job, pushes a gradient of the mlp (784-hidden-10) holding a NaN twice
// -- once through the client's own check (policy skip: an empty push on every pserver), once
// with the check skipped (the pserver holding the NaN refuses it) -- and leaves. Returns what
// happened, for the report.
std::string PoisonedPush(const std::string& endpoint, const std::string& job, int hidden) {
  std::string what;
  for (bool unchecked : {false, true}) {
    ClientOptions co;
    co.connection.etcd_endpoints = {endpoint};
    co.connection.job = job;
    co.trainer_id = "poison";
    co.lease_ttl_seconds = 3;
    co.allow_nonfinite = unchecked;
    co.request_timeout = std::chrono::seconds(60);
    auto c = Client::Connect(co);
    if (!c.ok()) return "could not join: " + c.status().ToString();
    std::vector<float> w1(784 * hidden), b1(hidden), w2(hidden * 10), b2(10);
    (void)(*c)->AddDense("w1", w1.data(), w1.size());
    (void)(*c)->AddDense("b1", b1.data(), b1.size());
    (void)(*c)->AddDense("w2", w2.data(), w2.size());
    (void)(*c)->AddDense("b2", b2.data(), b2.size());
    if (Status s = (*c)->Initialize(); !s.ok()) return "could not join: " + s.ToString();
    std::vector<float> g(w1.size(), 0.0f);
    g[12345 % g.size()] = std::nanf("");
    Gradients grads;
    grads.Dense("w1", g);
    grads.samples = 1;
    Handle h = (*c)->PushPull(grads);
    Status s = h.Wait();
    what += std::string(unchecked ? "past the check: " : "through the check: ") +
            (h.skipped() ? "skipped"
             : s.ok()    ? "accepted?!"
                         : "refused (" + s.message().substr(0, 60) + ")") +
            "; ";
    (void)(*c)->Close();
  }
  return what;
}

struct ChaosOptions {
  int passes = 20;
  uint64_t seed = 7;
  double every_s = 3;
  int64_t checkpoint_steps = 0;  // > 0: consistent checkpoints (a lost pserver rolls the job back)
  int replicas = 1;              // > 1: a lost pserver's shards are taken over by their backups
  double max_loss = 0.01;        // accuracy the faults may cost, as a fraction of the fault-free run's
  double min_accuracy = 0.80;    // both runs must train: below this a run is broken, whatever the other did
};

RunResult RunJob(const std::string& dir, const std::string& store, const std::string& name, bool chaos,
                 const ChaosOptions& o) {
  const int passes = o.passes;
  const uint64_t seed = o.seed;
  const double every_s = o.every_s;
  RunResult out;
  const std::string run = dir + "/" + name, job = name;
  testing::SpawnOptions so;
  so.argv = LocalOnFashionMnist(run, store);
  so.argv.insert(so.argv.end(), {"--eval-dataset",
                                 "fm-test",
                                 "--model",
                                 "mlp",
                                 "--model-arg",
                                 "hidden=128",
                                 "--pservers",
                                 "2",
                                 "--trainers",
                                 "2",
                                 "--standby-masters",
                                 "1",
                                 "--passes",
                                 std::to_string(passes),
                                 "--lease-ttl",
                                 "3",
                                 o.checkpoint_steps > 0 ? "--checkpoint-steps" : "--checkpoint-every",
                                 o.checkpoint_steps > 0 ? std::to_string(o.checkpoint_steps) : "1",
                                 "--job",
                                 job,
                                 "--task-timeout",
                                 "30",
                                 "--replicas",
                                 std::to_string(o.replicas)});
  so.log_path = run + ".log";
  auto p = testing::Subprocess::Spawn(so);
  if (!p.ok()) return out;
  // The run's etcd, from run.json.
  std::unique_ptr<etcd::EtcdClient> etcd;
  std::string endpoint;
  for (int i = 0; i < 600 && !etcd; ++i) {
    auto text = ReadFile(run + "/run.json");
    if (text.ok()) {
      endpoint = nlohmann::json::parse(*text)["etcd"];
      auto c = EtcdClientOf(endpoint);
      if (c.ok()) etcd = std::move(*c);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (!etcd) return out;
  std::mt19937_64 rng(seed);
  auto start = Now();
  auto elapsed = [&] { return std::chrono::duration<double>(Now() - start).count(); };
  double next_fault = every_s;
  int n = 0;
  bool stalled = false, corrupted = false, frozen = false, poisoned = false;
  TimePoint next_poll = Now();
  while ((*p)->running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Now() >= next_poll) {
      next_poll = Now() + std::chrono::milliseconds(500);
      auto st = testing::MasterStatusOf(etcd.get(), job);
      if (st.tasks() > 0) out.last = st;
    }
    if (!chaos || elapsed() < next_fault) continue;
    auto st = testing::MasterStatusOf(etcd.get(), job);
    if (st.finished() || st.step() == 0) {
      next_fault = elapsed() + 0.5;
      continue;
    }
    ++n;
    Fault f;
    f.at_s = elapsed();
    std::optional<TimePoint> stop_time;
    int64_t step0 = st.step();
    int kind = static_cast<int>((n + seed) % 3);  // pserver, trainer, master in turn
    if (n == 2 && !stalled) kind = 3;
    if (n == 4 && !corrupted) kind = 4;
    if (n == 5 && !poisoned) kind = 5;
    if (n == 6 && !frozen) kind = 6;
    if (kind == 5) {
      f.what =
          "a poisoned push (a third trainer pushes a NaN gradient: " + PoisonedPush(endpoint, job, 128) + ")";
      poisoned = true;
    } else if (kind == 0 || kind == 3 || kind == 4 || kind == 6) {
      int idx = static_cast<int>(rng() % 2);
      int64_t pid = testing::RegisteredPid(etcd.get(), keys::PserverPrefix(job), std::to_string(idx));
      if (pid <= 0) continue;
      if (kind == 6) {
        f.what = "SIGSTOP pserver " + std::to_string(idx) + " for good (never resumed; lease TTL 3 s)";
        stop_time = Now();
        ::kill(static_cast<pid_t>(pid), SIGSTOP);  // the supervisor must kill and replace it
        frozen = true;
      } else if (kind == 3) {
        f.what = "SIGSTOP pserver " + std::to_string(idx) + " for 5 s (lease TTL 3 s), then SIGCONT";
        stop_time = Now();
        ::kill(static_cast<pid_t>(pid), SIGSTOP);
        std::this_thread::sleep_for(std::chrono::seconds(5));
        ::kill(static_cast<pid_t>(pid), SIGCONT);
        stalled = true;
      } else {
        if (kind == 4) {
          auto rec = etcd->Get(keys::Checkpoint(job, idx));
          if (rec.ok() && !rec->kvs.empty()) {
            auto recs = DecodeCheckpointRecords(rec->kvs[0].value);
            if (recs.ok() && !recs->empty()) {
              std::fstream file(CheckpointPath(run + "/checkpoints", job, idx, (*recs)[0].uuid),
                                std::ios::in | std::ios::out | std::ios::binary);
              file.seekp(64);
              file.put('\x55');
              corrupted = true;
            }
          }
          f.what = "corrupt the newest checkpoint of pserver " + std::to_string(idx) + ", then kill -9 it";
        } else {
          f.what = "kill -9 pserver " + std::to_string(idx);
        }
        ::kill(static_cast<pid_t>(pid), SIGKILL);
      }
    } else if (kind == 1) {
      int idx = static_cast<int>(rng() % 2);
      int64_t pid = testing::RegisteredPid(etcd.get(), keys::TrainerPrefix(job), std::to_string(idx));
      if (pid <= 0) continue;
      f.what = "kill -9 trainer " + std::to_string(idx);
      ::kill(static_cast<pid_t>(pid), SIGKILL);
    } else {
      auto pids = MasterPids(endpoint);
      if (pids.empty()) continue;
      int64_t pid = pids[rng() % pids.size()];
      f.what = "kill -9 a master (pid " + std::to_string(pid) + ")";
      ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
    // Recovery: until the job's step moves 50 past where it was after the fault (progress
    // reports arrive about once a second, so this reads up to a second long).
    auto fault_time = stop_time.value_or(Now());  // a stall counts from its start
    stop_time.reset();
    step0 = std::max(step0, testing::MasterStatusOf(etcd.get(), job).step());
    while (std::chrono::duration<double>(Now() - fault_time).count() < 120) {
      // The job ending counts as moving (a short run may end within the window).
      if (!(*p)->running()) {
        if ((*p)->exit_code() == 0) f.recovery_s = std::chrono::duration<double>(Now() - fault_time).count();
        break;
      }
      auto s2 = testing::MasterStatusOf(etcd.get(), job);
      if (s2.finished() || s2.step() > step0 + 50) {
        f.recovery_s = std::chrono::duration<double>(Now() - fault_time).count();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    out.faults.push_back(f);
    next_fault = elapsed() + every_s * (0.5 + (rng() % 1000) / 1000.0);
  }
  auto code = (*p)->Wait(std::chrono::minutes(30));
  out.output = (*p)->Output();
  out.ok = code && *code == 0;
  auto res = ReadFile(run + "/result.json");
  if (res.ok()) out.result = nlohmann::json::parse(*res);
  // Crashes: a process that died of a signal nobody sent (we send 9, 19/18 only).
  std::regex crash("(\\S+) killed by signal (\\d+)");
  for (std::sregex_iterator it(out.output.begin(), out.output.end(), crash), end; it != end; ++it) {
    int sig = std::stoi((*it)[2]);
    if (sig != SIGKILL) {
      ++out.crashes;
      out.crash_lines.push_back(it->str());
    }
  }
  for (const auto& e : fs::directory_iterator(run + "/logs")) {
    auto text = ReadFile(e.path().string());
    if (text.ok() && (text->find("terminate called") != std::string::npos ||
                      text->find("Segmentation fault") != std::string::npos)) {
      ++out.crashes;
      out.crash_lines.push_back(e.path().filename().string() + ": crashed");
    }
  }
  return out;
}

int Run(const ChaosOptions& o) {
  const int passes = o.passes;
  const uint64_t seed = o.seed;
  const double every_s = o.every_s;
  auto dir = MakeTempDir("chaos-");
  if (!dir.ok()) return 1;
  const std::string store = *dir + "/store";
  if (Status u = UploadFashionMnist(store, *dir, /*test_set=*/true); !u.ok()) {
    std::fprintf(stderr, "%s\n", u.ToString().c_str());
    return 1;
  }
  std::printf(
      "chaos: mlp (784-128-10) on Fashion-MNIST, %d passes, 2 pservers (%s), 2 trainers, "
      "2 masters; a fault every ~%.0f s, seed %llu\n\n",
      passes,
      o.checkpoint_steps > 0
          ? ("consistent checkpoints every " + std::to_string(o.checkpoint_steps) + " steps").c_str()
          : "checkpoint every 1 s",
      every_s, static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  RunResult clean = RunJob(*dir, store, "clean", false, o);
  RunResult chaos = RunJob(*dir, store, "chaos", true, o);
  auto acc = [](const RunResult& r) {
    return r.result.value("metrics", nlohmann::json::object()).value("accuracy", -1.0);
  };
  std::printf(
      "| run | finished | test accuracy | tasks x passes | failed tasks | samples reported (since the master "
      "last started) "
      "|\n|---|---|---|---|---|---|\n");
  for (auto* r : {&clean, &chaos}) {
    std::printf("| %s | %s | %.4f | %lld x %lld | %lld | %lld |\n", r == &clean ? "fault-free" : "chaos",
                r->ok ? "yes" : "NO", acc(*r), static_cast<long long>(r->result.value("tasks", 0)),
                static_cast<long long>(r->result.value("passes", 0)),
                static_cast<long long>(r->result.value("failed_tasks", -1)),
                static_cast<long long>(r->result.value("samples", 0)));
  }
  for (auto* r : {&clean, &chaos}) {
    std::printf(
        "%s: %lld task hand-outs for %lld task-passes (%lld handed out again after a trainer died or timed "
        "out), %lld duplicate finishes, %lld timeouts\n",
        r == &clean ? "fault-free" : "chaos", static_cast<long long>(r->last.dispatches()),
        static_cast<long long>(r->last.tasks() * r->last.passes()),
        static_cast<long long>(
            std::max<int64_t>(0, r->last.dispatches() - r->last.tasks() * r->last.passes())),
        static_cast<long long>(r->last.duplicates()), static_cast<long long>(r->last.timeouts()));
  }
  std::printf("\n");
  std::printf("| t (s) | fault | recovery (s) |\n|---|---|---|\n");
  for (const auto& flt : chaos.faults) {
    std::printf("| %.1f | %s | %s |\n", flt.at_s, flt.what.c_str(),
                flt.recovery_s < 0 ? "did not move within 120 s"
                                   : std::to_string(flt.recovery_s).substr(0, 4).c_str());
  }
  std::printf("\nWhat the supervisor saw and did:\n");
  std::regex ev(
      "\\S+ (killed by signal \\d+|exited with code \\d+|lost its lease|stopped answering \\(its lease "
      "expired while it still ran\\))(; restarting it|: stopping the job to roll| was lost)");
  std::map<std::string, int> events;
  for (std::sregex_iterator it(chaos.output.begin(), chaos.output.end(), ev), end; it != end; ++it) {
    std::string e = it->str();
    events[e.substr(0, e.find(';'))]++;
  }
  for (const auto& [e, k] : events) {
    std::printf("  %d x %s; %s\n", k, e.c_str(),
                o.checkpoint_steps > 0 && o.replicas == 1 && e.rfind("pserver", 0) == 0
                    ? "the job rolled back"
                    : (o.replicas > 1 && e.rfind("pserver", 0) == 0 ? "its backups took over; restarted"
                                                                    : "restarted"));
  }
  std::regex rb("rolling back to the consistent checkpoint of version (\\d+)");
  int rollbacks = 0;
  for (std::sregex_iterator it(chaos.output.begin(), chaos.output.end(), rb), end; it != end; ++it)
    ++rollbacks;
  if (o.checkpoint_steps > 0 || o.replicas > 1)
    std::printf("  %d rollbacks to a consistent checkpoint\n", rollbacks);
  std::printf("\nProcesses that crashed (died of a signal we did not send): %d\n", chaos.crashes);
  for (const auto& l : chaos.crash_lines) std::printf("  %s\n", l.c_str());
  // One-sided: the faults must not cost accuracy. A chaos run that ends better than the fault-free
  // one says the fault-free run was unlucky (asynchronous training's run-to-run spread), not that
  // chaos broke something; the floor keeps two broken runs from passing side by side.
  const double loss = acc(clean) - acc(chaos);
  bool trained = acc(clean) >= o.min_accuracy && acc(chaos) >= o.min_accuracy;
  bool pass = clean.ok && chaos.ok && trained && loss <= o.max_loss &&
              chaos.result.value("failed_tasks", -1) == 0 && chaos.crashes == 0;
  std::printf(
      "\n%s: the faults cost %.2f percentage points of accuracy (limit %.0f)%s, both runs %s %.2f, "
      "failed tasks %lld\n",
      pass ? "PASS" : "FAIL", loss * 100, o.max_loss * 100, loss < 0 ? " (the chaos run did better)" : "",
      trained ? "reached" : "did NOT both reach", o.min_accuracy,
      static_cast<long long>(chaos.result.value("failed_tasks", -1)));
  if (!pass) std::printf("(run directories kept in %s)\n", dir->c_str());
  if (pass) (void)RemoveAll(*dir);
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"chaos: training under a seeded fault schedule, beside a fault-free run"};
  tessera::bench::ChaosOptions o;
  bool smoke = false;
  app.add_option("--passes", o.passes, "passes over Fashion-MNIST")->capture_default_str();
  app.add_option("--seed", o.seed, "fault schedule seed")->capture_default_str();
  app.add_option("--every", o.every_s, "seconds between faults (on average)")->capture_default_str();
  app.add_option("--checkpoint-steps", o.checkpoint_steps,
                 "consistent checkpoints every N steps: a lost pserver rolls the job back (0: a checkpoint "
                 "every second per pserver, a lost one is refilled)")
      ->capture_default_str();
  app.add_option("--replicas", o.replicas,
                 "copies of every shard (1 or 2 with the 2 pservers): with 2 a lost pserver is taken over by "
                 "its backup, nothing rolled back")
      ->capture_default_str();
  app.add_flag(
      "--smoke", smoke,
      "the short version run by `make test`: 3 passes, a fault every 2 s; the faults may cost 3 "
      "points of accuracy and both runs must reach 0.75 (fewer passes leave more run-to-run spread)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::err);  // the poisoned push's trainer would log into the report
  if (smoke) {
    o.passes = 3;
    o.every_s = 2;
    o.max_loss = 0.03;
    o.min_accuracy = 0.75;
  }
  return tessera::bench::Run(o);
}
