// step_timeline: where the milliseconds of one training step go. The built-in mlp (784-H-10,
// batch 64, Adam) on Fashion-MNIST with one trainer in this process:
//   1. in one process, no Tessera: the same model code, the pservers' optimizer kernel applied
//      in place;
//   2. through Tessera: this process as the trainer client, `tessera pserver` processes (sync,
//      1 or 2 pservers), over shm and tcp.
// Per step, averaged over a pass: the model's forward and backward (compute), handing the push
// and pull to the client (submit: the in-process baseline's apply; through Tessera the push goes
// with PushPullAndWait, as the trainer loop's, so building the requests and scanning for NaN is
// in the exchange), and waiting for the answer (exchange: the transfer both ways, the pserver's
// work and the copies, none on the trainer's side in its window over shm); of the exchange, the pserver's
// time applying the step (its tessera_pserver_apply_seconds) and handling the requests
// (tessera_pserver_request_seconds), read from its /metrics. The records are in memory before timing. Then
// (unless --no-torch) the PyTorch MLP's step (bench/torch_step_timeline.py, 784-256-256-10) in one process,
// in two such processes at once (no communication: what two trainers' compute costs on these cores), as 2
// ranks of DistributedDataParallel over gloo, and as 2 trainers of a `tessera local` job with 1 and 2
// pservers, pushing once a step and during backward (overlap=True): data, forward, backward,
// step. The built-in mlp also pushes in pieces (Model::StepInPieces). Prints Markdown tables;
// see bench/README.md.
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>

#include "bench_cluster.h"
#include "common/busy_poll.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/math_threads.h"
#include "dataset/dataset.h"
#include "fashion_mnist.h"
#include "harness/ports.h"
#include "in_process_client.h"
#include "models/model.h"
#include "transport/stream_io.h"

namespace tessera::bench {
namespace {

struct Timeline {
  int64_t steps = 0;
  double compute = 0, submit = 0, exchange = 0;  // seconds, summed over the steps
  double apply = 0, handle = 0;                  // the pservers' (summed over them)
};

// The sum of a histogram's observations in a /metrics text (`series`: the name with its labels,
// e.g. tessera_pserver_request_seconds_sum{op="data"}); 0 when nothing was observed yet.
double MetricSum(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? 0.0 : std::stod(text.substr(at + series.size() + 2));
}

// The pservers' seconds spent applying (tessera_pserver_apply_seconds) and handling data
// requests, summed over them: one read of each one's /metrics.
struct PserverTimes {
  double apply = 0, handle = 0;
};
StatusOr<PserverTimes> PserverSeconds(Cluster& c, const std::string& job, int pservers) {
  PserverTimes sum;
  for (int i = 0; i < pservers; ++i) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, c.client->Get(keys::Pserver(job, i)));
    if (kv.kvs.empty()) return Status::NotFound("pserver " + std::to_string(i) + " is not registered");
    auto info = nlohmann::json::parse(kv.kvs[0].value, nullptr, false);
    if (!info.is_object() || !info.contains("metrics")) return Status::NotFound("no metrics address");
    const std::string url = info["metrics"].get<std::string>();
    std::smatch m;
    if (!std::regex_match(url, m, std::regex(R"((http://[^/]+)(/.*))")))
      return Status::Internal("bad url " + url);
    httplib::Client http(m[1].str());
    auto r = http.Get(m[2].str());
    if (!r || r->status != 200) return Status::Unavailable("cannot read " + url);
    sum.apply += MetricSum(r->body, "tessera_pserver_apply_seconds_sum");
    sum.handle += MetricSum(r->body, "tessera_pserver_request_seconds_sum{op=\"data\"}");
  }
  return sum;
}

// Trains one pass of `records` through `client` (already declared and initialized).
// `pieces`: the model pushes in pieces as backward computes them (Model::StepInPieces; compute
// then includes handing the pieces over, and exchange is what is left to wait for after it).
StatusOr<Timeline> Train(models::Model& model, Client& client, const std::vector<std::string>& records,
                         int batch, int warmup_steps, bool pieces = false) {
  Timeline t;
  std::vector<std::string> b;
  for (size_t i = 0, step = 0; i < records.size(); i += batch, ++step) {
    b.assign(records.begin() + i, records.begin() + std::min(records.size(), i + batch));
    Gradients g;
    const auto t0 = Now();
    auto t1 = t0, t2 = t0;
    if (pieces) {
      TESSERA_RETURN_IF_ERROR(model.StepInPieces(client, b).status());
      t1 = t2 = Now();
      TESSERA_RETURN_IF_ERROR(model.Settle());
    } else {
      TESSERA_ASSIGN_OR_RETURN(auto r, model.Step(client, b, &g));
      g.samples = r.samples;
      t1 = Now();
      if (client.num_pservers() > 0) {
        // As the trainer loop does: the caller waits, so the push and pull may go in the window.
        t2 = t1;
        TESSERA_RETURN_IF_ERROR(client.PushPullAndWait(g).Wait());
      } else {
        Handle h = client.PushPull(g);  // the in-process baseline applies the step here
        t2 = Now();
        TESSERA_RETURN_IF_ERROR(h.Wait());
      }
    }
    const auto t3 = Now();
    if (static_cast<int>(step) < warmup_steps) continue;
    ++t.steps;
    t.compute += std::chrono::duration<double>(t1 - t0).count();
    t.submit += std::chrono::duration<double>(t2 - t1).count();
    t.exchange += std::chrono::duration<double>(t3 - t2).count();
  }
  return t;
}

StatusOr<std::unique_ptr<models::Model>> Mlp(int hidden, int batch) {
  models::ModelOptions mo;
  mo.batch_size = batch;
  mo.args["hidden"] = std::to_string(hidden);
  mo.args["pieces"] = "1";  // Train() chooses: StepInPieces, or Step and one push
  return models::MakeModel("mlp", mo);
}

// The PyTorch MLP's phases (bench/torch_step_timeline.py), ms per step, per trainer.
// kAloneTwice: two one-process runs at once, sharing nothing but the machine (the floor for two
// trainers on its cores). Every process's math libraries run one thread (as `tessera local`
// gives its trainers here: common/math_threads.h), except kAloneAllCores: one process with
// OpenBLAS's default of a thread per core.
// kTesseraNoWait: step(wait=False), the next batch read while the pulls travel.
enum class TorchSetup {
  kAlone,
  kAloneAllCores,
  kAloneTwice,
  kDdp,
  kTessera,
  kTesseraOverlap,
  kTesseraNoWait
};
StatusOr<std::vector<nlohmann::json>> TorchTimeline(const std::string& dir, const std::string& store,
                                                    int hidden, int batch, int pservers, TorchSetup setup) {
  const std::string script = std::string(TESSERA_SOURCE_DIR) + "/bench/torch_step_timeline.py";
  const std::vector<std::string> model = {"--hidden", std::to_string(hidden), "--batch",
                                          std::to_string(batch)};
  const std::string python = "/usr/bin/python3";
  const std::map<std::string, std::string> pythonpath = {{"PYTHONPATH", testing::BuildPath("python")}};
  std::vector<std::unique_ptr<testing::Subprocess>> procs;
  if (setup == TorchSetup::kAlone || setup == TorchSetup::kAloneAllCores ||
      setup == TorchSetup::kAloneTwice || setup == TorchSetup::kDdp) {
    // One process, two at once, or two ranks of DistributedDataParallel over gloo on loopback.
    const bool ddp = setup == TorchSetup::kDdp;
    const int ranks = setup == TorchSetup::kAlone || setup == TorchSetup::kAloneAllCores ? 1 : 2;
    const int port = testing::FreePort();
    for (int rank = 0; rank < ranks; ++rank) {
      testing::SpawnOptions o;
      o.argv = {python, script, ddp ? "--ddp" : "--alone", "--store", store};
      o.argv.insert(o.argv.end(), model.begin(), model.end());
      o.env = pythonpath;
      for (const char* var : kMathThreadVars) {
        if (setup == TorchSetup::kAloneAllCores) {
          o.argv.insert(o.argv.begin(), {"-u", var});  // not even one this bench inherited
        } else {
          o.env[var] = "1";
        }
      }
      if (setup == TorchSetup::kAloneAllCores) o.argv.insert(o.argv.begin(), "/usr/bin/env");
      if (ddp) {
        o.env["RANK"] = std::to_string(rank);
        o.env["WORLD_SIZE"] = std::to_string(ranks);
        o.env["MASTER_ADDR"] = "127.0.0.1";
        o.env["MASTER_PORT"] = std::to_string(port);
      }
      o.log_path = dir + "/torch-" + (ddp ? "ddp-" : "alone-") + std::to_string(rank) + ".log";
      TESSERA_ASSIGN_OR_RETURN(auto p, testing::Subprocess::Spawn(o));
      procs.push_back(std::move(p));
    }
    for (auto& p : procs) {
      auto code = p->Wait(std::chrono::minutes(10));
      if (!code || *code != 0) return Status::Internal("the PyTorch run failed: " + p->Output());
    }
    // DDP's rank 0 speaks for both (they go in lock step); two lone runs each for itself.
    std::vector<nlohmann::json> out;
    for (size_t i = 0; i < (ddp ? 1 : procs.size()); ++i) {
      std::string text = procs[i]->Output();
      auto at = text.rfind("{\"data\"");
      if (at == std::string::npos) return Status::Internal("no timeline in " + text);
      out.push_back(nlohmann::json::parse(text.substr(at), nullptr, false));
    }
    return out;
  }
  const std::string flag = setup == TorchSetup::kTesseraOverlap  ? " --overlap"
                           : setup == TorchSetup::kTesseraNoWait ? " --no-wait"
                                                                 : "";
  const std::string run =
      dir + "/torch-run-" + std::to_string(pservers) + (flag.empty() ? "" : flag.substr(3));
  std::string cmd = python + " " + script + " --hidden " + std::to_string(hidden) + " --batch " +
                    std::to_string(batch) + flag;
  testing::SpawnOptions o;
  o.argv = LocalOnFashionMnist(run, store);
  o.argv.insert(o.argv.end(), {"--pservers", std::to_string(pservers), "--trainers", "2", "--mode", "sync",
                               "--optimizer", "adam:lr=0.001", "--transport", "shm", "--trainer-cmd", cmd});
  o.log_path = run + ".log";
  TESSERA_ASSIGN_OR_RETURN(auto p, testing::Subprocess::Spawn(o));
  auto code = p->Wait(std::chrono::minutes(10));
  if (!code || *code != 0) return Status::Internal("the PyTorch run failed; see " + o.log_path);
  std::vector<nlohmann::json> out;
  for (const char* id : {"0", "1"}) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(run + "/timeline-" + id + ".json"));
    out.push_back(nlohmann::json::parse(text, nullptr, false));
  }
  return out;
}

void TorchRows(const std::string& dir, const std::string& store, int hidden, int batch) {
  std::printf(
      "\nPyTorch MLP 784-%d-%d-10, batch %d per trainer, 1 torch thread per process, Adam "
      "(bench/torch_step_timeline.py); DDP and Tessera: 2 trainers (Tessera: sync, shm, Adam on the "
      "pservers); "
      "each trainer's means\n\n| setup | data ms | forward ms | backward ms | step ms | total ms | samples/s "
      "(all "
      "trainers) |\n|---|---|---|---|---|---|---|\n",
      hidden, hidden, batch);
  // `ranks`: trainers behind each reported one (DDP reports rank 0; its ranks go in lock step).
  auto row = [&](const std::string& setup, const StatusOr<std::vector<nlohmann::json>>& r, int ranks = 1) {
    if (!r.ok()) {
      std::printf("| %s | failed: %s ||||||\n", setup.c_str(), r.status().ToString().c_str());
      return;
    }
    double rate = 0;
    for (size_t i = 0; i < r->size(); ++i) {
      const auto& j = (*r)[i];
      if (!j.is_object()) continue;
      const double total =
          j.value("data", 0.0) + j.value("forward", 0.0) + j.value("backward", 0.0) + j.value("step", 0.0);
      rate += ranks * batch / total * 1000.0;
      std::printf("| %s%s | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", setup.c_str(),
                  r->size() > 1 ? (", trainer " + std::to_string(i)).c_str() : "", j.value("data", 0.0),
                  j.value("forward", 0.0), j.value("backward", 0.0), j.value("step", 0.0), total,
                  i + 1 == r->size() ? std::to_string(static_cast<int>(rate)).c_str() : "");
    }
    std::fflush(stdout);
  };
  row("one process, torch.optim.Adam", TorchTimeline(dir, store, hidden, batch, 0, TorchSetup::kAlone));
  row("one process, OpenBLAS's default threads (one per core)",
      TorchTimeline(dir, store, hidden, batch, 0, TorchSetup::kAloneAllCores));
  row("two one-process runs at once (no communication)",
      TorchTimeline(dir, store, hidden, batch, 0, TorchSetup::kAloneTwice));
  row("DistributedDataParallel, gloo, 2 ranks (rank 0)",
      TorchTimeline(dir, store, hidden, batch, 0, TorchSetup::kDdp), 2);
  for (int pservers : {1, 2}) {
    const std::string name = "Tessera, " + std::to_string(pservers) + " pserver" + (pservers > 1 ? "s" : "");
    row(name, TorchTimeline(dir, store, hidden, batch, pservers, TorchSetup::kTessera));
    row(name + ", overlap=True",
        TorchTimeline(dir, store, hidden, batch, pservers, TorchSetup::kTesseraOverlap));
    row(name + ", step(wait=False)",
        TorchTimeline(dir, store, hidden, batch, pservers, TorchSetup::kTesseraNoWait));
  }
}

void Row(const std::string& setup, const StatusOr<Timeline>& r, bool pserver) {
  if (!r.ok()) {
    std::printf("| %s | failed: %s |||||||\n", setup.c_str(), r.status().ToString().c_str());
    return;
  }
  const double n = static_cast<double>(std::max<int64_t>(1, r->steps)) / 1000.0;  // -> ms per step
  const double total = (r->compute + r->submit + r->exchange) / n;
  auto ms = [&](double s) { return pserver ? std::to_string(s / n).substr(0, 5) : std::string("-"); };
  std::printf("| %s | %.3f | %.3f | %.3f | %s | %s | %.3f | %.0f |\n", setup.c_str(), r->compute / n,
              r->submit / n, r->exchange / n, ms(r->apply).c_str(), ms(r->handle).c_str(), total,
              64.0 / total * 1000.0);
  std::fflush(stdout);
}

int Run(int hidden, int batch, int warmup, int apply_threads, bool mlp, bool torch) {
  auto dir = MakeTempDir("step-timeline-");
  if (!dir.ok()) return 1;
  const std::string store = *dir + "/store";
  if (Status s = UploadFashionMnist(store, *dir, false); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  auto read = ReadAllRecords(store, "fm");
  if (!read.ok()) {
    std::fprintf(stderr, "%s\n", read.status().ToString().c_str());
    return 1;
  }
  const std::vector<std::string> records = std::move(*read);
  if (!mlp) {
    if (torch) TorchRows(*dir, store, hidden, batch);
    (void)RemoveAll(*dir);
    return 0;
  }
  const std::string opt = "adam:lr=0.001";
  std::printf(
      "mlp 784-%d-10, batch %d, %s, one pass of %zu records (the first %d steps not timed); pservers "
      "with --apply-threads %d\n\n",
      hidden, batch, opt.c_str(), records.size(), warmup, apply_threads);
  std::printf(
      "| setup | compute ms | submit ms | exchange ms | of which pserver apply ms | pserver request handling "
      "ms "
      "| step ms | samples/s |\n|---|---|---|---|---|---|---|---|\n");
  Row(
      "one process, no Tessera",
      [&]() -> StatusOr<Timeline> {
        TESSERA_ASSIGN_OR_RETURN(auto model, Mlp(hidden, batch));
        InProcessClient client(*OptimizerConfig::Parse(opt));
        TESSERA_RETURN_IF_ERROR(model->Declare(client));
        return Train(*model, client, records, batch, warmup);
      }(),
      false);
  Cluster c;
  c.dir = *dir;
  c.apply_threads = std::to_string(apply_threads);
  c.pipeline =
      std::getenv("TESSERA_PIPELINE") == nullptr || std::string(std::getenv("TESSERA_PIPELINE")) != "0";
  if (Status s = LaunchEtcd(c); !s.ok()) {
    std::fprintf(stderr, "etcd: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int pservers : {1, 2}) {
    for (const char* transport : {"shm", "tcp"}) {
      // One push, pushed in pieces, and one push with busy polling (with two pservers, three
      // processes share the two cores of the VM the figures come from).
      for (int variant = 0; variant < 3; ++variant) {
        const bool pieces = variant == 1;
        c.busy_poll_us = variant == 2 ? kBusyPollMicros : 0;
        SpinCounters spun_before, spun_after;  // this process's (the trainer's) polling
        StatusOr<Timeline> r = [&]() -> StatusOr<Timeline> {
          TESSERA_ASSIGN_OR_RETURN(auto job, StartJob(c, pservers, "sync", false, opt));
          TESSERA_ASSIGN_OR_RETURN(auto client, Connect(c, job, transport));
          TESSERA_ASSIGN_OR_RETURN(auto model, Mlp(hidden, batch));
          TESSERA_RETURN_IF_ERROR(model->Declare(*client));
          TESSERA_RETURN_IF_ERROR(client->Initialize());
          // The warm-up steps are inside Train: the pservers' sums are read after a short pass.
          std::vector<std::string> warm(records.begin(),
                                        records.begin() + static_cast<size_t>(warmup) * batch);
          TESSERA_RETURN_IF_ERROR(Train(*model, *client, warm, batch, warmup, pieces).status());
          TESSERA_ASSIGN_OR_RETURN(PserverTimes before, PserverSeconds(c, job, pservers));
          spun_before = SpinCountersNow();
          TESSERA_ASSIGN_OR_RETURN(Timeline t, Train(*model, *client, records, batch, 0, pieces));
          spun_after = SpinCountersNow();
          TESSERA_ASSIGN_OR_RETURN(PserverTimes after, PserverSeconds(c, job, pservers));
          t.apply = after.apply - before.apply;
          t.handle = after.handle - before.handle;
          (void)client->Close();
          return t;
        }();
        Row("Tessera, " + std::string(transport) + ", 1 trainer, " + std::to_string(pservers) + " pserver" +
                (pservers > 1 ? "s" : "") +
                (pieces ? " (sync, pushed in pieces)"
                 : variant == 2
                     ? " (sync, one push, busy polling: the trainer spun " +
                           std::to_string(spun_after.spins - spun_before.spins) + " waits, slept " +
                           std::to_string(spun_after.skipped - spun_before.skipped) + ")"
                     : " (sync, one push)"),
            r, true);
      }
    }
  }
  for (auto& p : c.pservers) p->Terminate(std::chrono::seconds(5));
  c.pservers.clear();
  if (torch) TorchRows(*dir, store, hidden, batch);
  (void)RemoveAll(*dir);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"where the time of one training step goes (built-in mlp, Fashion-MNIST)"};
  int hidden = 256, batch = 64, warmup = 50, apply_threads = 0;
  bool no_torch = false, torch_only = false;
  app.add_option("--hidden", hidden, "hidden units")->check(CLI::Range(1, 65536));
  app.add_option("--batch", batch, "batch size")->check(CLI::Range(1, 60000));
  app.add_option("--warmup", warmup, "steps run before timing")->check(CLI::Range(0, 900));
  app.add_option("--apply-threads", apply_threads, "the pservers' --apply-threads (0: the machine's)")
      ->check(CLI::Range(0, 64));
  app.add_flag("--no-torch", no_torch, "skip the PyTorch trainer's timeline");
  app.add_flag("--torch-only", torch_only, "only the PyTorch trainer's timeline")->excludes("--no-torch");
  bool no_pipeline = false;
  app.add_flag("--no-pipeline", no_pipeline,
               "trainers send one request at a time per pserver (ClientOptions::pipeline off)");
  CLI11_PARSE(app, argc, argv);
  // Read by this process's clients (bench_cluster.h) and inherited by every trainer it starts.
  if (no_pipeline) ::setenv("TESSERA_PIPELINE", "0", 1);
  tessera::LogOptions lo;
  lo.node = "step_timeline";
  lo.level = "warn";
  (void)tessera::InitLogging(lo);
  return tessera::bench::Run(hidden, batch, warmup, apply_threads, !torch_only, !no_torch);
}
