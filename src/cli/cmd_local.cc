// `tessera local`: a whole job on this machine, supervised; `tessera local scale`: change the
// number of trainers or pservers of a running `tessera local`.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "cli/spec_flags.h"
#include "common/busy_poll.h"
#include "common/flag_names.h"
#include "common/logging.h"
#include "common/progress.h"
#include "common/strings.h"
#include "local/supervisor.h"
#include "local/trainer_counts.h"
#include "spec/spec_settings.h"

namespace tessera::cli {
namespace {

int RunLocalCmd(local::LocalOptions o) {
  std::atomic<bool> stop{false}, stop_following{false};
  // Following a data set, the first Ctrl-C (or SIGTERM) ends the job gracefully: no more new
  // data, the rest trained on, the model saved. The next one stops everything.
  SignalWatcher signals([&](int) {
    if (o.follow && !stop_following.exchange(true)) {
      std::fprintf(stderr,
                   "\ntessera local: taking no more new data; the job ends once what landed is trained on "
                   "(Ctrl-C again to stop at once)\n");
      return;
    }
    stop = true;
  });
  LogOptions lo;
  lo.job = o.spec.name;
  lo.node = "local";
  if (Status s = InitLogging(lo); !s.ok()) return Fail("local", s);
  o.tessera_bin = SelfPath();
  o.progress_tty = ProgressBar::StderrIsTerminal();
  if (o.resume && o.run_dir.empty()) {
    return Fail("local", Status::InvalidArgument("--resume needs --run DIR (the run to continue)"));
  }
  if (o.run_dir.empty()) o.run_dir = "runs/" + o.spec.name + "-" + std::to_string(::getpid());
  for (std::string* path : {&o.run_dir, &o.spec.store.path, &o.spec.checkpoints.path, &o.scale_file})
    if (!path->empty()) *path = std::filesystem::absolute(*path).lexically_normal().string();
  auto r = local::RunLocal(o, &stop, &stop_following);
  if (!r.ok()) return Fail("local", r.status());
  if (!r->completed) {
    std::fprintf(stderr, "tessera local: stopped before the job finished (run directory %s)\n",
                 o.run_dir.c_str());
    return signals.received() ? 128 + signals.received() : 1;
  }
  std::printf("job %s finished: %s\nmodel saved to %s\nrun directory %s (logs, result.json)\n",
              o.spec.name.c_str(), r->metrics.c_str(), r->model_path.c_str(), o.run_dir.c_str());
  return 0;
}

// With --spec: the job is the spec's, then each flag given on the command line (or by its
// environment variable) over it. A trainer given by flag replaces the spec's of the other kind.
Status OptionsFromSpec(const std::string& path, const std::vector<std::string>& settings, CLI::App* cmd,
                       const CLI::Option* spec_opt, local::LocalOptions* o) {
  TESSERA_ASSIGN_OR_RETURN(auto file, spec::LoadSpecFile(path, settings, spec::Where::kThisMachine));
  *o = local::LocalOptions{};
  o->spec = std::move(file.spec);
  for (CLI::Option* opt : cmd->get_options())
    if (opt != spec_opt && opt->count() > 0) opt->run_callback();
  const bool model_flag = cmd->count(flags::kModel) > 0, cmd_flag = cmd->count("--trainer-cmd") > 0;
  if (model_flag && !cmd_flag) o->spec.command.clear();
  if (cmd_flag && !model_flag) o->spec.model.clear();
  return Status::OK();
}

// The trainer counts from --trainers and --min-trainers (local/trainer_counts.h).
void SettleTrainers(const CLI::App& cmd, int min_trainers, bool from_spec, local::LocalOptions* o) {
  local::TrainerFlags given;
  if (cmd.count("--trainers") > 0) given.trainers = o->spec.trainers_max;
  if (cmd.count("--min-trainers") > 0) given.min_trainers = min_trainers;
  local::SettleTrainerCounts(given, from_spec, &o->spec);
}

// The job itself: its trainer, its topology, its training. `min_trainers`: --min-trainers' value.
void AddJobFlags(CLI::App* cmd, local::LocalOptions* o, int* min_trainers) {
  spec::JobSpec& s = o->spec;
  cmd->add_option(flags::kModel, s.model, "built-in model: mlp, logreg or word2vec");
  cmd->add_option_function<std::string>(
      "--trainer-cmd", [o](const std::string& c) { o->spec.command = spec::ShellCommand(c); },
      "your trainer command, run through /bin/sh");
  cmd->add_option(flags::kModelArg, s.model_args, "model setting key=value (repeatable)");
  cmd->add_option(flags::kBatchSize, s.batch_size, "records per step per trainer")->capture_default_str();
  cmd->add_option("--pservers", s.pservers,
                  "parameter servers (an elastic job's shards: the most it can run)")
      ->capture_default_str();
  cmd->add_option(
         "--start-pservers", s.start_pservers,
         "elastic: start this many pservers (1..--pservers) and add or remove some while the job runs "
         "with `tessera local scale --pservers N`; shards move between them live (0: not elastic)")
      ->capture_default_str();
  cmd->add_option("--trainers", s.trainers_max, "trainers")->capture_default_str();
  cmd->add_option("--min-trainers", *min_trainers,
                  "sync: the first step waits for this many trainers (0: all of --trainers)")
      ->capture_default_str();
  cmd->add_option_function<int>(
      "--standby-masters", [o](int n) { o->spec.masters = 1 + n; }, "standby masters (default 0)");
  cmd->add_option("--mode", s.mode, "sync, async or ssp:S")->capture_default_str();
  cmd->add_option("--optimizer", s.optimizer,
                  "server-side optimizer: sgd, momentum, adagrad, adam or ftrl, with settings, e.g. "
                  "adam:lr=0.001 or ftrl:alpha=0.5,beta=1,l1=0.001,l2=0.001")
      ->capture_default_str();
  cmd->add_option(flags::kPasses, s.passes, "passes over the data")->capture_default_str();
}

// How this run goes: following a data set, a secured etcd, scaling by file, resuming.
void AddRunFlags(CLI::App* cmd, local::LocalOptions* o) {
  cmd->add_flag(
      "--follow", o->follow,
      "online learning: also train on the chunks `tessera upload --append` adds to the data set while "
      "the job runs, each record once, in the order they land (one pass); the first Ctrl-C ends the "
      "job once what landed is trained on, and saves the model");
  cmd->add_flag("--secure-etcd", o->secure_etcd,
                "the etcd this starts requires credentials: a user of the job's own, whose credentials "
                "(RUN/etcd-credentials, mode 0600) every process gets");
  cmd->add_option("--scale-file", o->scale_file,
                  "follow the number of trainers written in this file (the platform's way of scaling a job)");
  cmd->add_flag("--resume", o->resume,
                "continue the job of an earlier run in --run DIR (give the same flags): its etcd data, task "
                "position and the pservers' checkpoints");
}

// Checkpoints, replicas and backups, tasks and leases, the data plane.
void AddRecoveryAndTransportFlags(CLI::App* cmd, local::LocalOptions* o) {
  spec::JobSpec& s = o->spec;
  cmd->add_option(flags::kCheckpointEvery, s.checkpoint_every,
                  "pservers checkpoint their shards every S seconds (0: no checkpoints)")
      ->capture_default_str();
  cmd->add_option(flags::kCheckpointDir, s.checkpoints.path,
                  "where the pservers keep their checkpoints (default RUN/checkpoints)");
  cmd->add_option(
         "--checkpoint-steps", s.checkpoint_steps,
         "sync: consistent checkpoints at every multiple of N steps (all pservers at the same version, "
         "with the data position); a lost pserver rolls the whole job back to the newest one, and "
         "--resume continues from it (0: off)")
      ->capture_default_str();
  cmd->add_option(
         "--backup-trainers", s.backup_trainers,
         "sync: a step closes once all but this many trainers pushed; a later push is dropped and its "
         "trainer goes on (a slow trainer does not hold the job back; < --trainers)")
      ->capture_default_str();
  cmd->add_option("--replicas", s.replicas,
                  "copies of every shard, each on a different pserver (1..--pservers): a pserver that is "
                  "lost is replaced by a backup at once, nothing rolled back")
      ->capture_default_str();
  cmd->add_option(
         "--nonfinite", s.nonfinite,
         "a gradient with NaN or infinity: skip (the step goes on without it; logged and counted) or "
         "error (the trainer's push fails)")
      ->check(CLI::IsMember({"skip", "error"}))
      ->capture_default_str();
  cmd->add_option("--wire", s.wire,
                  "how gradients and values travel between trainers and pservers: f32; bf16 or f16 (half "
                  "precision both ways); topk:R (a push sends the fraction R of each block's largest "
                  "gradients) or sign (one bit each), keeping what was not sent for the next step; per "
                  "parameter after the first, e.g. bf16,emb=f32,fc1.weight=topk:0.01")
      ->capture_default_str();
  cmd->add_option(flags::kChunksPerTask, s.chunks_per_task,
                  "chunks in one task; 0: as many as hold about 4 MiB of records, while a pass keeps at "
                  "least 8 tasks (4 a trainer)")
      ->capture_default_str();
  cmd->add_option(flags::kTaskTimeout, s.task_timeout, "seconds before a pending task is handed out again")
      ->capture_default_str();
  cmd->add_option(flags::kLeaseTtl, s.lease_ttl, "lease TTL of every process, in seconds")
      ->capture_default_str();
  cmd->add_option(flags::kTransport, s.transport,
                  "data plane between trainers and pservers: auto (shared memory here), shm, tcp or grpc")
      ->check(CLI::IsMember({"auto", "tcp", "shm", "grpc"}))
      ->capture_default_str();
  cmd->add_option(
         flags::kBusyPoll, o->busy_poll_us,
         "microseconds a trainer waiting for its reply, and a pserver for the next request, check "
         "for it without sleeping first: saves two wake-ups a step, and keeps a core busy "
         "meanwhile; a poller that loses its core or keeps waiting longer backs off by itself. Default: "
         "$TESSERA_BUSY_POLL_US if set, else 1000 when the trainers and "
         "pservers have a core each (no more than the cores this process may use: its CPUs, cut to "
         "its container's CPU quota), else 0")
      ->check(CLI::Range(0, kMaxBusyPollMicros));
  cmd->add_option("--model-out", o->model_out, "where to save the trained model (default RUN/model.tsm)");
}

// `tessera local scale`.
void RegisterLocalScale(CLI::App* cmd, int* exit_code) {
  auto* scale = cmd->add_subcommand(
      "scale",
      "Change the number of trainers, or of an elastic job's pservers, of a running `tessera local`.\n"
      "New ones take the lowest free ids; the highest go first. A pserver that goes hands its\n"
      "shards over to the others before it exits: nothing is lost or rolled back.");
  auto run = std::make_shared<std::string>();
  auto trainers = std::make_shared<int>(-1);
  auto pservers = std::make_shared<int>(-1);
  scale->add_option("--run", *run, "the run directory")->required();
  scale->add_option("--trainers", *trainers, "trainers to run");
  scale->add_option("--pservers", *pservers,
                    "pserver processes to run (a job started with --start-pservers; 1..--pservers)");
  scale->callback([run, trainers, pservers, exit_code] {
    local::ScaleRequest r;
    if (*trainers != -1) r.trainers = *trainers;
    if (*pservers != -1) r.pservers = *pservers;
    Status s = local::ScaleLocal(*run, r);
    if (!s.ok()) {
      *exit_code = Fail("local scale", s);
      return;
    }
    std::string what;
    if (r.trainers) what = std::to_string(*r.trainers) + " trainers";
    if (r.pservers) what += (what.empty() ? "" : " and ") + std::to_string(*r.pservers) + " pservers";
    std::printf("asked %s to run %s\n", run->c_str(), what.c_str());
    *exit_code = 0;
  });
}

}  // namespace

void RegisterLocal(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<local::LocalOptions>();
  auto* cmd = app.add_subcommand(
      "local",
      "Run a whole job on this machine: an etcd (unless --etcd names one), a master (plus\n"
      "--standby-masters), P pservers and T trainers, each restarted with backoff if it dies.\n"
      "Trainers run a built-in model (--model mlp|logreg|word2vec) or your command\n"
      "(--trainer-cmd \"python3 train.py\"), which gets TESSERA_ETCD, TESSERA_JOB,\n"
      "TESSERA_TRAINER_ID, TESSERA_STORE, TESSERA_DATASET, TESSERA_EVAL_DATASET, TESSERA_RUN_DIR,\n"
      "TESSERA_BATCH_SIZE. Logs go to RUN/logs/. At the end the model is saved (RUN/model.tsm)\n"
      "and RUN/result.json written. Ctrl-C stops everything. With --follow the job also trains on\n"
      "what `tessera upload --append` adds to the data set while it runs; the first Ctrl-C then\n"
      "ends it gracefully once the data that landed is trained on. --spec job.yaml runs the job\n"
      "spec that `tessera launch`, `deploy k8s` and `submit --spec` take (docs/deploy.md); flags\n"
      "given beside it override its settings.");
  auto spec_path = std::make_shared<std::string>();
  auto* spec_opt =
      cmd->add_option("--spec", *spec_path,
                      "the job spec (YAML or JSON) that `tessera launch`, `deploy k8s` and `submit --spec` "
                      "take; flags given beside it override its settings")
          ->check(CLI::ExistingFile);
  auto spec_settings = std::make_shared<std::vector<std::string>>();
  AddSpecSettings(cmd, spec_opt, spec_settings.get());
  cmd->add_option("--run", o->run_dir, "run directory (default: runs/<job>-<pid>)");
  cmd->add_option(flags::kJob, o->spec.name, "job name")->capture_default_str();
  cmd->add_option_function<std::string>(
      flags::kEtcd, [o](const std::string& e) { o->spec.etcd_endpoints = Split(e, ','); },
      "use this etcd (host:port[,host:port...]) instead of starting one");
  cmd->add_option(flags::kStore, o->spec.store.path, "data set store (required)")->envname(flags::kEnvStore);
  cmd->add_option(flags::kDataset, o->spec.dataset, "data set to train on (required)");
  cmd->add_option(flags::kEvalDataset, o->spec.eval_dataset, "held-out data set evaluated after each pass");
  auto min_trainers = std::make_shared<int>(0);
  AddJobFlags(cmd, o.get(), min_trainers.get());
  AddRunFlags(cmd, o.get());
  AddRecoveryAndTransportFlags(cmd, o.get());
  RegisterLocalScale(cmd, exit_code);
  cmd->callback([o, cmd, spec_opt, spec_path, spec_settings, min_trainers, exit_code] {
    if (cmd->got_subcommand("scale")) return;
    if (!spec_path->empty()) {
      if (Status s = OptionsFromSpec(*spec_path, *spec_settings, cmd, spec_opt, o.get()); !s.ok()) {
        *exit_code = Fail("local", s);
        return;
      }
    }
    SettleTrainers(*cmd, *min_trainers, /*from_spec=*/!spec_path->empty(), o.get());
    *exit_code = RunLocalCmd(*o);
  });
}

}  // namespace tessera::cli
