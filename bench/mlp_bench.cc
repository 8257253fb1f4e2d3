// mlp_bench: training throughput (samples/s) of the built-in `mlp` on Fashion-MNIST, three ways:
//   1. in one process without Tessera: the same model code and the same optimizer kernel the
//      pservers run, applied in place (no network, no barrier, no master);
//   2. through Tessera: `tessera local` with 1 pserver and 1 trainer (and with 2 and 2), over each
//      transport (shm, tcp, grpc), measured from the trainer's "joined" to its "trainer done" log
//      lines (start-up excluded);
//   3. PyTorch on the same model and batch size, one process and DDP (gloo, 2 processes), when
//      /usr/bin/python3 has torch (bench/torch_mlp.py).
// Uploads Fashion-MNIST from the Debian package into a temp store. Prints a Markdown table with
// where a step went (trainer 0's "time:" phases; one process: its compute and update); with
// --pairs N, only rows 1 and the shm 1x1 job, alternated N times, with each pair's ratio.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

#include "common/clock.h"
#include "common/files.h"
#include "common/math_threads.h"
#include "dataset/dataset.h"
#include "fashion_mnist.h"
#include "harness/log_lines.h"
#include "harness/subprocess.h"
#include "in_process_client.h"
#include "models/model.h"
#include "models/trainer.h"

namespace tessera::bench {
namespace {

using testing::BuildPath;

// A run's throughput, and where its steps went (ms per step; read and acknowledge are 0 in one
// process, whose records are in memory and whose "exchange" is the optimizer's update in place).
struct Measured {
  double samples_per_s = 0;
  double read_ms = 0, compute_ms = 0, exchange_ms = 0, acknowledge_ms = 0;
  int64_t steps = 0, steps_ahead = 0;  // every trainer's; those begun on values arriving in place
};

StatusOr<Measured> InProcess(const std::string& store, int hidden, int batch, const std::string& opt) {
  models::ModelOptions mo;
  mo.batch_size = batch;
  mo.args["hidden"] = std::to_string(hidden);
  TESSERA_ASSIGN_OR_RETURN(auto model, models::MakeModel("mlp", mo));
  TESSERA_ASSIGN_OR_RETURN(auto oc, OptimizerConfig::Parse(opt));
  InProcessClient client(oc);
  TESSERA_RETURN_IF_ERROR(model->Declare(client));
  TESSERA_ASSIGN_OR_RETURN(auto records, ReadAllRecords(store, "fm"));
  const auto start = Now();
  std::vector<std::string> b;
  double compute = 0, update = 0;
  int64_t steps = 0;
  for (size_t i = 0; i < records.size(); i += batch, ++steps) {
    b.assign(records.begin() + i, records.begin() + std::min(records.size(), i + batch));
    Gradients g;
    const auto t0 = Now();
    TESSERA_ASSIGN_OR_RETURN(auto r, model->Step(client, b, &g));
    g.samples = r.samples;
    const auto t1 = Now();
    TESSERA_RETURN_IF_ERROR(client.PushPull(g).Wait());
    compute += std::chrono::duration<double>(t1 - t0).count();
    update += std::chrono::duration<double>(Now() - t1).count();
  }
  Measured m;
  m.samples_per_s = records.size() / std::chrono::duration<double>(Now() - start).count();
  m.compute_ms = 1e3 * compute / steps;
  m.exchange_ms = 1e3 * update / steps;
  return m;
}

// samples/s of every trainer together, from the trainers' logs of a `tessera local` run, and
// trainer 0's phases per step (its "trainer done" line's times).
StatusOr<Measured> ThroughTessera(const std::string& dir, const std::string& store, int hidden, int batch,
                                  const std::string& opt, int pservers, int trainers,
                                  const std::string& transport, const std::string& suffix = "",
                                  const std::map<std::string, std::string>& env = {}) {
  std::string run =
      dir + "/run-" + std::to_string(pservers) + "x" + std::to_string(trainers) + "-" + transport + suffix;
  testing::SpawnOptions so;
  so.argv = LocalOnFashionMnist(run, store);
  so.argv.insert(so.argv.end(),
                 {"--model", "mlp", "--model-arg", "hidden=" + std::to_string(hidden), "--batch-size",
                  std::to_string(batch), "--optimizer", opt, "--pservers", std::to_string(pservers),
                  "--trainers", std::to_string(trainers), "--passes", "1", "--transport", transport});
  so.log_path = run + ".log";
  for (const auto& [k, v] : env) so.env[k] = v;
  TESSERA_ASSIGN_OR_RETURN(auto p, testing::Subprocess::Spawn(so));
  auto code = p->Wait(std::chrono::minutes(10));
  if (!code || *code != 0) return Status::Internal("tessera local failed: " + p->Output());
  double first = 1e18, last = 0;
  int64_t samples = 0, steps_all = 0;
  Measured out;
  std::regex done_re("trainer done: (\\d+) steps, (\\d+) samples");
  std::regex ahead_re("(\\d+) steps begun on values arriving in place");
  for (int t = 0; t < trainers; ++t) {
    std::ifstream log(run + "/logs/trainer-" + std::to_string(t) + ".log");
    std::string line;
    std::smatch m;
    while (std::getline(log, line)) {
      if (line.find(" joined ") != std::string::npos) first = std::min(first, testing::LogLineSeconds(line));
      if (std::regex_search(line, m, done_re)) {
        last = std::max(last, testing::LogLineSeconds(line));
        samples += std::stoll(m[2]);
        steps_all += std::stoll(m[1]);
        const double steps = std::max(1.0, std::stod(m[1]));
        if (std::smatch a; std::regex_search(line, a, ahead_re)) out.steps_ahead += std::stoll(a[1]);
        if (auto phases = models::PhasesFromLine(line); t == 0 && phases) {
          out.read_ms = 1e3 * phases->read / steps;
          out.compute_ms = 1e3 * phases->compute / steps;
          out.exchange_ms = 1e3 * phases->exchange / steps;
          out.acknowledge_ms = 1e3 * phases->acknowledge / steps;
        }
      }
    }
  }
  if (samples == 0 || last <= first) return Status::Internal("could not read the trainers' logs in " + run);
  out.samples_per_s = samples / (last - first);
  out.steps = steps_all;
  return out;
}

// The ratio on a noisy machine: one process and the shm 1x1 job alternated `pairs`
// times, each pair's ratio, then their mean and median (a VM's neighbours move both rows by a
// fifth within minutes; a pair's two runs share most of it).
void Pairs(const std::string& dir, const std::string& store, int hidden, int batch, const std::string& opt,
           int pairs) {
  std::printf(
      "| pair | one process | shm, 1 pserver, 1 trainer | ratio | one process: compute + update ms | "
      "1x1 trainer: read + compute + exchange + acknowledge ms |\n|---|---|---|---|---|---|\n");
  std::vector<double> ratios;
  for (int i = 1; i <= pairs; ++i) {
    auto alone = InProcess(store, hidden, batch, opt);
    auto shm = ThroughTessera(dir, store, hidden, batch, opt, 1, 1, "shm", "-" + std::to_string(i));
    if (!alone.ok() || !shm.ok()) {
      std::printf("| %d | failed: %s |\n", i,
                  (!alone.ok() ? alone.status() : shm.status()).ToString().c_str());
      continue;
    }
    ratios.push_back(shm->samples_per_s / alone->samples_per_s);
    std::printf("| %d | %.0f | %.0f | %.0f%% | %.3f + %.3f | %.3f + %.3f + %.3f + %.3f |\n", i,
                alone->samples_per_s, shm->samples_per_s, 100 * ratios.back(), alone->compute_ms,
                alone->exchange_ms, shm->read_ms, shm->compute_ms, shm->exchange_ms, shm->acknowledge_ms);
    std::fflush(stdout);
  }
  if (ratios.empty()) return;
  double sum = 0;
  for (double r : ratios) sum += r;
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  const double median = n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  std::printf("\nshm 1x1 against one process: mean %.0f%%, median %.0f%%, %zu pairs\n", 100 * sum / n,
              100 * median, n);
}

// 2 trainers and `pservers` pservers (shm, sync) with the trainers beginning their next step on
// values arriving in place (TESSERA_WORK_AHEAD=1) and without (0), alternated `pairs` times.
void AheadPairs(const std::string& dir, const std::string& store, int hidden, int batch,
                const std::string& opt, int pservers, int pairs) {
  std::printf(
      "| pair | samples/s, ahead | samples/s, off | gain | steps begun ahead | trainer 0 exchange ms, ahead "
      "| off |\n|---|---|---|---|---|---|---|\n");
  std::vector<double> gains;
  for (int i = 1; i <= pairs; ++i) {
    const std::string n = std::to_string(i);
    auto on = ThroughTessera(dir, store, hidden, batch, opt, pservers, 2, "shm", "-ahead-" + n,
                             {{"TESSERA_WORK_AHEAD", "1"}});
    auto off = ThroughTessera(dir, store, hidden, batch, opt, pservers, 2, "shm", "-off-" + n,
                              {{"TESSERA_WORK_AHEAD", "0"}});
    if (!on.ok() || !off.ok()) {
      std::printf("| %d | failed: %s |\n", i, (!on.ok() ? on.status() : off.status()).ToString().c_str());
      continue;
    }
    gains.push_back(on->samples_per_s / off->samples_per_s - 1);
    std::printf("| %d | %.0f | %.0f | %+.0f%% | %lld of %lld | %.3f | %.3f |\n", i, on->samples_per_s,
                off->samples_per_s, 100 * gains.back(), static_cast<long long>(on->steps_ahead),
                static_cast<long long>(on->steps), on->exchange_ms, off->exchange_ms);
    std::fflush(stdout);
  }
  if (gains.empty()) return;
  double sum = 0;
  for (double g : gains) sum += g;
  std::sort(gains.begin(), gains.end());
  std::printf(
      "\n2 trainers x %d pservers, begun ahead against not: mean %+.1f%%, median %+.1f%%, %zu pairs\n",
      pservers, 100 * sum / gains.size(), 100 * gains[gains.size() / 2], gains.size());
}

int Run(int hidden, int batch, const std::string& opt, int pairs, int ahead_pairs, int ahead_pservers) {
  auto dir = MakeTempDir("mlp-bench-");
  if (!dir.ok()) return 1;
  const std::string store = *dir + "/store";
  if (Status u = UploadFashionMnist(store, *dir, /*test_set=*/false); !u.ok()) {
    std::fprintf(stderr, "%s\n", u.ToString().c_str());
    return 1;
  }
  std::printf("mlp (784-%d-10), batch %d, %s, 1 pass of Fashion-MNIST (60000 samples)\n\n", hidden, batch,
              opt.c_str());
  if (pairs > 0 || ahead_pairs > 0) {
    if (pairs > 0) Pairs(*dir, store, hidden, batch, opt, pairs);
    if (ahead_pairs > 0) AheadPairs(*dir, store, hidden, batch, opt, ahead_pservers, ahead_pairs);
    (void)RemoveAll(*dir);
    return 0;
  }
  // Where trainer 0's steps went (one process: its compute and its update in place).
  std::printf(
      "| setup | samples/s | read ms | compute ms | exchange ms (one process: update) | acknowledge ms |\n"
      "|---|---|---|---|---|---|\n");
  auto row = [](const std::string& name, const StatusOr<Measured>& v) {
    if (v.ok()) {
      std::printf("| %s | %.0f | %.3f | %.3f | %.3f | %.3f |\n", name.c_str(), v->samples_per_s, v->read_ms,
                  v->compute_ms, v->exchange_ms, v->acknowledge_ms);
    } else {
      std::printf("| %s | failed: %s |\n", name.c_str(), v.status().ToString().c_str());
    }
    std::fflush(stdout);
  };
  row("one process, no Tessera (same model code and optimizer kernel)", InProcess(store, hidden, batch, opt));
  for (const char* t : {"shm", "tcp", "grpc"}) {
    row(std::string("Tessera over ") + t + ": 1 pserver, 1 trainer (sync)",
        ThroughTessera(*dir, store, hidden, batch, opt, 1, 1, t));
    row(std::string("Tessera over ") + t + ": 2 pservers, 2 trainers (sync), both trainers",
        ThroughTessera(*dir, store, hidden, batch, opt, 2, 2, t));
  }
  // PyTorch, if present: the same model and batch size.
  testing::SpawnOptions py;
  py.argv = {"/usr/bin/python3", std::string(TESSERA_SOURCE_DIR) + "/bench/torch_mlp.py",
             "--store",          store,
             "--hidden",         std::to_string(hidden),
             "--batch",          std::to_string(batch)};
  py.env["PYTHONPATH"] = BuildPath("python");
  // One thread per process for its math libraries too: OpenBLAS ignores torch.set_num_threads.
  for (const char* var : kMathThreadVars) py.env[var] = "1";
  py.log_path = *dir + "/torch.log";
  auto t = testing::Subprocess::Spawn(py);
  if (t.ok() && (*t)->Wait(std::chrono::minutes(15)).value_or(1) == 0) {
    std::printf("%s", (*t)->Output().c_str());
  } else {
    std::printf("| PyTorch | not measured: %s |\n",
                t.ok() ? (*t)->Output().c_str() : t.status().ToString().c_str());
  }
  (void)RemoveAll(*dir);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"mlp training throughput: in one process, through Tessera, and PyTorch"};
  int hidden = 256, batch = 64;
  std::string opt = "adam:lr=0.001";
  app.add_option("--hidden", hidden, "hidden units");
  app.add_option("--batch", batch, "samples per step");
  app.add_option("--optimizer", opt, "optimizer");
  int pairs = 0;
  app.add_option("--pairs", pairs,
                 "instead of the table: one process and the shm 1x1 job alternated this many times, "
                 "with each pair's ratio")
      ->check(CLI::Range(1, 100));
  int ahead_pairs = 0;
  app.add_option("--ahead-pairs", ahead_pairs,
                 "instead of the table: a 2-trainer shm job with its trainers beginning steps ahead and "
                 "without (TESSERA_WORK_AHEAD), alternated this many times")
      ->check(CLI::Range(1, 100));
  int ahead_pservers = 1;
  app.add_option("--ahead-pservers", ahead_pservers, "pservers of --ahead-pairs' job")
      ->check(CLI::Range(1, 8));
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::Run(hidden, batch, opt, pairs, ahead_pairs, ahead_pservers);
}
