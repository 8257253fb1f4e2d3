// `tessera train` (a built-in model as a trainer), `tessera export` (the trained model to one
// file) and `tessera gen-ctr` (a synthetic click log for logreg).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "client/exporter.h"
#include "client/job_connection.h"
#include "common/flag_names.h"
#include "common/logging.h"
#include "common/strings.h"
#include "models/ctr_gen.h"
#include "models/trainer.h"
#include "transport/shm_window.h"
#include "transport/stream_io.h"

namespace tessera::cli {
namespace {

struct TrainFlags {
  EtcdFlags etcd;
  std::string model, trainer_id, store, eval_dataset;
  int batch_size = 64;
  uint64_t seed = 1;
  std::vector<std::string> model_args;
  int64_t lease_ttl = 10;
  std::string transport = "auto";
  std::string log_level = "info";
};

int RunTrain(const TrainFlags& f) {
  std::atomic<bool> stop{false};
  SignalWatcher signals([&](int) { stop = true; });
  LogOptions lo;
  lo.job = f.etcd.job;
  lo.node = "trainer" + (f.trainer_id.empty() ? std::string() : "-" + f.trainer_id);
  lo.level = f.log_level;
  if (Status s = InitLogging(lo); !s.ok()) return Fail("train", s);
  auto conn = ConnectionFromFlags(f.etcd);
  if (!conn.ok()) return Fail("train", conn.status());
  auto args = models::ParseModelArgs(f.model_args);
  if (!args.ok()) return Fail("train", args.status());
  models::TrainerOptions o;
  o.connection = *conn;
  o.trainer_id = f.trainer_id;
  o.model = f.model;
  o.model_options.batch_size = f.batch_size;
  o.model_options.seed = f.seed;
  o.model_options.args = *args;
  o.store = f.store;
  o.eval_dataset = f.eval_dataset;
  o.lease_ttl_seconds = f.lease_ttl;
  o.transport = f.transport;
  o.stop = &stop;
  auto r = models::RunTrainer(o);
  if (!r.ok()) return Fail("train", r.status());
  std::string metrics;
  for (const auto& m : r->final_metrics) metrics += fmt::format(" {}={:.4f}", m.name, m.value);
  const std::string polling = SpinSummary(SpinCountersNow());
  std::string in_place = WindowSummary(WindowCountersNow());
  if (r->steps_ahead > 0)
    in_place += fmt::format("; {} steps begun on values arriving in place", r->steps_ahead);
  spdlog::info("trainer done: {} steps, {} samples{}{}{}{}{}{}; time: {}", r->steps, r->samples,
               metrics.empty() ? "" : ";", metrics, polling.empty() ? "" : "; ", polling,
               in_place.empty() ? "" : "; ", in_place, models::PhasesSummary(r->seconds));
  return 0;
}

struct ExportFlags {
  EtcdFlags etcd;
  std::string out;
  double timeout_s = 60;
};

int RunExport(const ExportFlags& f) {
  auto conn = ConnectionFromFlags(f.etcd);
  if (!conn.ok()) return Fail("export", conn.status());
  auto job = ConnectJob(*conn, std::chrono::seconds(2));
  if (!job.ok()) return Fail("export", job.status());
  auto m = ExportModel(job->etcd.get(), f.etcd.job, job->secret,
                       std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000)), job->tls);
  if (!m.ok()) return Fail("export", m.status());
  if (Status s = models::WriteModelFile(f.out, *m); !s.ok()) return Fail("export", s);
  int64_t values = 0;
  for (const auto& t : m->tensors) values += static_cast<int64_t>(t.values.size());
  std::printf("exported job %s at version %lld: %zu tensors, %lld values, to %s\n", f.etcd.job.c_str(),
              static_cast<long long>(m->step), m->tensors.size(), static_cast<long long>(values),
              f.out.c_str());
  return 0;
}

struct GenFlags {
  models::CtrOptions o;
  std::string train, eval;
};

int RunGen(const GenFlags& f) {
  auto r = models::GenerateCtr(f.o, f.train, f.eval);
  if (!r.ok()) return Fail("gen-ctr", r.status());
  std::printf(
      "wrote %lld training and %lld evaluation rows (click rate %.3f); best achievable AUC on the "
      "evaluation rows: %.4f\n",
      static_cast<long long>(f.o.train_rows), static_cast<long long>(f.o.eval_rows), r->click_rate,
      r->best_auc);
  return 0;
}

}  // namespace

void RegisterModels(CLI::App& app, int* exit_code) {
  auto t = std::make_shared<TrainFlags>();
  auto* train = app.add_subcommand(
      flags::kCommandTrain,
      "Run a trainer for a built-in model: it reads the tasks the job's master hands out, pushes\n"
      "gradients and pulls parameters. Models: mlp (image classifier, e.g. Fashion-MNIST),\n"
      "logreg (sparse logistic regression over libsvm rows), word2vec (skip-gram over text).\n"
      "SIGTERM stops it after the current step. Used by `tessera local --model`.");
  AddEtcdFlags(train, &t->etcd);
  train->add_option(flags::kModel, t->model, "mlp, logreg or word2vec")->required();
  train->add_option("--trainer-id", t->trainer_id, "trainer id (default: the lowest free number)")
      ->envname(flags::kEnvTrainerId);
  train->add_option(flags::kStore, t->store, "data set store as mounted here")->envname(flags::kEnvStore);
  train->add_option(flags::kEvalDataset, t->eval_dataset, "held-out data set for the end of each pass")
      ->envname(flags::kEnvEvalDataset);
  train->add_option(flags::kBatchSize, t->batch_size, "records per step")->capture_default_str();
  train->add_option("--seed", t->seed, "initialization seed")->capture_default_str();
  train->add_option(flags::kModelArg, t->model_args, "model setting key=value (repeatable), e.g. hidden=256");
  train->add_option(flags::kLeaseTtl, t->lease_ttl, "seconds after which a dead trainer's tasks go back")
      ->envname(flags::kEnvLeaseTtl)
      ->capture_default_str();
  train
      ->add_option(
          flags::kTransport, t->transport,
          "data plane to the pservers: auto (shared memory on the same host, else tcp), shm, tcp, grpc")
      ->envname(flags::kEnvTransport)
      ->check(CLI::IsMember({"auto", "tcp", "shm", "grpc"}))
      ->capture_default_str();
  train->add_option("--log-level", t->log_level, "trace, debug, info, warn, error")->capture_default_str();
  train->callback([t, exit_code] { *exit_code = RunTrain(*t); });

  auto e = std::make_shared<ExportFlags>();
  auto* exp =
      app.add_subcommand("export",
                         "Write a job's trained model (every pserver's shard merged) to one .tsm file that\n"
                         "the built-in models and the Python module can load. While the job trains the\n"
                         "model is one consistent cut: in a sync job every pserver copies its shard at the\n"
                         "same version (the file's step) and the export reads the copies; training goes on.");
  AddEtcdFlags(exp, &e->etcd);
  exp->add_option("--out", e->out, "model file to write")->required();
  exp->add_option("--timeout", e->timeout_s, "seconds to wait for the pservers")->capture_default_str();
  exp->callback([e, exit_code] { *exit_code = RunExport(*e); });

  auto g = std::make_shared<GenFlags>();
  auto* gen = app.add_subcommand(
      "gen-ctr",
      "Write a deterministic synthetic click log (libsvm) with known true weights, and print the\n"
      "best AUC any model can reach on its evaluation rows.");
  gen->add_option("--train-out", g->train, "training rows file")->required();
  gen->add_option("--eval-out", g->eval, "evaluation rows file")->required();
  gen->add_option("--rows", g->o.train_rows, "training rows")->capture_default_str();
  gen->add_option("--eval-rows", g->o.eval_rows, "evaluation rows")->capture_default_str();
  gen->add_option("--features", g->o.features, "distinct feature ids")->capture_default_str();
  gen->add_option("--per-row", g->o.per_row, "features per row")->capture_default_str();
  gen->add_option("--zipf", g->o.zipf, "Zipf exponent of feature popularity")->capture_default_str();
  gen->add_option("--seed", g->o.seed, "seed")->capture_default_str();
  gen->callback([g, exit_code] { *exit_code = RunGen(*g); });
}

}  // namespace tessera::cli
