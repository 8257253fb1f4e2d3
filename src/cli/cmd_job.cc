// `tessera job create|show|delete`: a job's configuration and slot map in etcd.
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "common/clock.h"
#include "common/random.h"
#include "coord/connection.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "job/job_access.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/slot_map.h"
#include "spec/job_spec.h"

namespace tessera::cli {
namespace {

struct JobFlags {
  EtcdFlags etcd;
  int pservers = 1;
  int slots = 1024;
  int64_t block_size = 1 << 16;
  std::string mode = "sync";
  std::string optimizer = spec::kDefaultOptimizer;
  int min_trainers = 1;
  int replicas = 1;
  int backup_trainers = 0;
  int start_pservers = 0;
  int64_t checkpoint_steps = 0;
  std::string nonfinite = "skip";
  std::string wire = "f32";
  bool force = false;
  bool if_absent = false;
  bool secure = false;
  bool tls = false;
  std::string credentials_out;  // --secure: where the job's etcd credentials go
};

// Which field of an existing job differs from the one asked for ("" when none that matters).
std::string Differs(const JobConfig& have, const JobConfig& want) {
  if (have.pservers != want.pservers) return "pservers " + std::to_string(have.pservers);
  if (have.slots != want.slots) return "slots " + std::to_string(have.slots);
  if (have.block_size != want.block_size) return "block size " + std::to_string(have.block_size);
  if (have.mode.ToString() != want.mode.ToString()) return "mode " + have.mode.ToString();
  if (have.optimizer.ToString() != want.optimizer.ToString()) return "optimizer " + have.optimizer.ToString();
  if (have.min_trainers != want.min_trainers) return "min trainers " + std::to_string(have.min_trainers);
  if (have.checkpoint_steps != want.checkpoint_steps)
    return "checkpoint steps " + std::to_string(have.checkpoint_steps);
  if (have.tls != want.tls) return have.tls ? "TLS" : "no TLS";
  if (have.replicas != want.replicas) return "replicas " + std::to_string(have.replicas);
  if (have.initial_pservers != want.initial_pservers)
    return "elastic start " + std::to_string(have.initial_pservers);
  if (have.backup_trainers != want.backup_trainers)
    return "backup trainers " + std::to_string(have.backup_trainers);
  if (have.nonfinite != want.nonfinite)
    return std::string("nonfinite ") + NonFinitePolicyName(have.nonfinite);
  if (have.wire != want.wire) return "wire " + have.wire.ToString();
  return "";
}

// --secure: refused before anything is written when it could not work or would protect nothing.
Status CheckSecurable(const JobFlags& f, const std::string& credentials_out) {
  TESSERA_ASSIGN_OR_RETURN(etcd::EtcdOptions admin, EtcdOptionsFromFlags(f.etcd));
  if (admin.username.empty()) {
    return Status::InvalidArgument(
        "--secure makes an etcd user for the job: run it as etcd's root user (--etcd-user root with "
        "--etcd-password or TESSERA_ETCD_PASSWORD, or --etcd-credentials)");
  }
  if (std::filesystem::exists(credentials_out)) {
    return Status::AlreadyExists(credentials_out + " exists; remove it or give --credentials-out");
  }
  return CheckEtcdAuthEnabled(admin);
}

int RunCreate(const JobFlags& f) {
  JobConfig c;
  c.pservers = f.pservers;
  c.slots = f.slots;
  c.block_size = f.block_size;
  auto mode = ConsistencyMode::Parse(f.mode);
  if (!mode.ok()) return Fail("job create", mode.status());
  c.mode = *mode;
  auto opt = OptimizerConfig::Parse(f.optimizer);
  if (!opt.ok()) return Fail("job create", opt.status());
  c.optimizer = *opt;
  c.min_trainers = f.min_trainers;
  c.replicas = f.replicas;
  c.backup_trainers = f.backup_trainers;
  c.initial_pservers = f.start_pservers;
  c.checkpoint_steps = f.checkpoint_steps;
  auto nonfinite = ParseNonFinitePolicy(f.nonfinite);
  if (!nonfinite.ok()) return Fail("job create", nonfinite.status());
  c.nonfinite = *nonfinite;
  auto wire = WireChoice::Parse(f.wire);
  if (!wire.ok()) return Fail("job create", wire.status());
  c.wire = *wire;
  c.token = NewUuid();
  c.created_ms = WallMillis();
  c.tls = f.tls;
  Status v = c.Validate();
  if (!v.ok()) return Fail("job create", v);
  const std::string credentials_out =
      f.credentials_out.empty() ? f.etcd.job + ".etcd-credentials" : f.credentials_out;
  if (f.secure) {
    if (Status s = CheckSecurable(f, credentials_out); !s.ok()) return Fail("job create", s);
  }
  auto client = ConnectEtcd(f.etcd);
  if (!client.ok()) return Fail("job create", client.status());
  auto r = (*client)->Commit(CreateJobTxn(f.etcd.job, &c, security::JobSecret::Generate()));
  if (!r.ok()) return Fail("job create", r.status());
  if (!r->succeeded && f.if_absent) {
    // Launchers and init containers run this on every (re)start: the same job is fine.
    auto got = (*client)->Get(keys::Config(f.etcd.job));
    if (!got.ok()) return Fail("job create", got.status());
    auto have = got->kvs.empty() ? StatusOr<JobConfig>(Status::NotFound("its configuration vanished"))
                                 : JobConfig::FromJson(got->kvs[0].value);
    if (!have.ok()) return Fail("job create", have.status());
    std::string diff = Differs(*have, c);
    if (!diff.empty()) {
      return Fail("job create", Status::AlreadyExists("job '" + f.etcd.job + "' already exists with " + diff +
                                                      ", not as asked (`tessera job delete` removes it)"));
    }
    std::printf("job %s exists already with the same configuration\n", f.etcd.job.c_str());
    return 0;
  }
  if (!r->succeeded) {
    return Fail("job create", Status::AlreadyExists("job '" + f.etcd.job +
                                                    "' already exists (see `tessera job show`; "
                                                    "`tessera job delete` removes it)"));
  }
  std::printf(
      "created job %s: %d pservers, %d slots, block size %lld, mode %s, optimizer %s, min trainers %d\n",
      f.etcd.job.c_str(), c.pservers, c.slots, static_cast<long long>(c.block_size),
      c.mode.ToString().c_str(), c.optimizer.ToString().c_str(), c.min_trainers);
  if (f.secure) {
    auto user = CreateJobEtcdUser(client->get(), f.etcd.job);
    if (!user.ok()) {
      return Fail("job create", user.status().WithContext("job " + f.etcd.job +
                                                          " was created without its etcd user (`tessera job "
                                                          "delete` it and create it again)"));
    }
    if (Status s = WriteEtcdCredentials(credentials_out, *user); !s.ok()) return Fail("job create", s);
    std::printf(
        "job %s has its own etcd user %s, allowed its keys only; its credentials are in %s (mode 0600): give "
        "it "
        "to the job's processes with --etcd-credentials %s or TESSERA_ETCD_CREDENTIALS\n",
        f.etcd.job.c_str(), user->user.c_str(), credentials_out.c_str(), credentials_out.c_str());
  }
  return 0;
}

int RunShow(const JobFlags& f) {
  auto client = ConnectEtcd(f.etcd);
  if (!client.ok()) return Fail("job show", client.status());
  auto cfg = (*client)->Get(keys::Config(f.etcd.job));
  if (!cfg.ok()) return Fail("job show", cfg.status());
  if (cfg->kvs.empty()) return Fail("job show", Status::NotFound("job '" + f.etcd.job + "' does not exist"));
  auto c = JobConfig::FromJson(cfg->kvs[0].value);
  if (!c.ok()) return Fail("job show", c.status().WithContext(keys::Config(f.etcd.job)));
  auto map_kv = (*client)->Get(keys::SlotMap(f.etcd.job));
  if (!map_kv.ok()) return Fail("job show", map_kv.status());
  std::printf("job %s\n", f.etcd.job.c_str());
  std::printf("  pservers      %d\n", c->pservers);
  std::printf("  slots         %d\n", c->slots);
  std::printf("  block size    %lld elements\n", static_cast<long long>(c->block_size));
  std::printf("  mode          %s\n", c->mode.ToString().c_str());
  std::printf("  optimizer     %s\n", c->optimizer.ToString().c_str());
  std::printf("  min trainers  %d\n", c->min_trainers);
  if (c->replicas > 1) std::printf("  replicas      %d copies of every shard\n", c->replicas);
  if (c->initial_pservers > 0)
    std::printf("  elastic       starts on %d pserver processes; up to %d (one per shard)\n",
                c->initial_pservers, c->pservers);
  if (c->backup_trainers > 0)
    std::printf("  backup trainers %d (a step closes without its last %d pushes)\n", c->backup_trainers,
                c->backup_trainers);
  std::printf("  non-finite    %s\n", NonFinitePolicyName(c->nonfinite));
  std::printf("  wire          %s\n", c->wire.Describe().c_str());
  if (c->checkpoint_steps > 0) {
    std::printf("  consistent checkpoints every %lld steps\n", static_cast<long long>(c->checkpoint_steps));
  }
  std::printf("  tls           %s\n", c->tls ? "mutual TLS between masters, pservers and trainers" : "off");
  if (c->secret_fingerprint.empty()) {
    std::printf("  secret        none (its messages are not authenticated)\n");
  } else {
    std::printf("  secret        fingerprint %s (at %s)\n", c->secret_fingerprint.c_str(),
                keys::Secret(f.etcd.job).c_str());
  }
  if (map_kv->kvs.empty()) {
    std::printf("  slot map      missing!\n");
    return 1;
  }
  auto map = SlotMap::FromJson(map_kv->kvs[0].value);
  if (!map.ok()) return Fail("job show", map.status().WithContext(keys::SlotMap(f.etcd.job)));
  std::printf("  slot map      ");
  for (int p = 0; p < map->pservers(); ++p) {
    std::printf("%spserver %d: %zu slots", p ? ", " : "", p, map->SlotsOf(p).size());
  }
  std::printf("\n");
  return 0;
}

int RunDelete(const JobFlags& f) {
  auto client = ConnectEtcd(f.etcd);
  if (!client.ok()) return Fail("job delete", client.status());
  Registry ps(client->get(), keys::PserverPrefix(f.etcd.job));
  auto live = ps.List();
  if (!live.ok()) return Fail("job delete", live.status());
  if (!live->members.empty() && !f.force) {
    return Fail("job delete",
                Status::FailedPrecondition(std::to_string(live->members.size()) + " pservers of job '" +
                                           f.etcd.job + "' are running; stop them or pass --force"));
  }
  auto n = (*client)->Delete(keys::Job(f.etcd.job), true);
  if (!n.ok()) return Fail("job delete", n.status());
  std::printf("deleted job %s (%lld keys)\n", f.etcd.job.c_str(), static_cast<long long>(*n));
  if (!f.etcd.user.empty() || !f.etcd.credentials.empty()) {
    // A job made with --secure has its own etcd user and role; an administrator removes them too.
    if (Status s = DeleteJobEtcdUser(client->get(), f.etcd.job); !s.ok()) {
      std::fprintf(stderr, "tessera job delete: the job's etcd user %s was not removed: %s\n",
                   JobEtcdUserName(f.etcd.job).c_str(), s.message().c_str());
    }
  }
  return 0;
}

// `job create`'s flags: the configuration it writes and how.
void AddCreateFlags(CLI::App* create, JobFlags* f) {
  AddEtcdFlags(create, &f->etcd);
  create->add_option("--pservers", f->pservers, "number of parameter servers")->capture_default_str();
  create->add_flag("--if-absent", f->if_absent,
                   "succeed when the job exists already with the same configuration (for launchers and init "
                   "containers that run on every restart); a different configuration is still an error");
  create->add_option("--mode", f->mode, "consistency: sync, async or ssp:S (bounded staleness S)")
      ->capture_default_str();
  create->add_option("--slots", f->slots, "hash slots that blocks and keys are placed on")
      ->capture_default_str();
  create->add_option("--block-size", f->block_size, "elements per dense block")->capture_default_str();
  create
      ->add_option(
          "--optimizer", f->optimizer,
          "default optimizer: sgd|momentum|adagrad|adam[:lr=..,weight_decay=..,momentum=..,nesterov=1,"
          "beta1=..,beta2=..,eps=..] or ftrl[:alpha=..,beta=..,l1=..,l2=..] (FTRL-Proximal); the default is\n"
          "the one of tessera local, job specs and the platform")
      ->capture_default_str();
  create->add_option("--min-trainers", f->min_trainers, "sync: the first step waits for this many trainers")
      ->capture_default_str();
  create
      ->add_option("--replicas", f->replicas,
                   "copies of every shard, each on a different pserver (1..pservers): a pserver lost is "
                   "replaced by a backup without rolling anything back")
      ->capture_default_str();
  create
      ->add_option("--start-pservers", f->start_pservers,
                   "elastic: the job starts on this many pserver processes and can grow to --pservers (its "
                   "shards) or shrink while it runs; shards move between processes live (0: not elastic)")
      ->capture_default_str();
  create
      ->add_option("--backup-trainers", f->backup_trainers,
                   "sync: a step closes once all but this many trainers pushed; a later push is dropped and "
                   "its trainer goes on from the open step (stragglers do not hold the job back; < "
                   "--min-trainers)")
      ->capture_default_str();
  create
      ->add_option(
          "--checkpoint-steps", f->checkpoint_steps,
          "sync: pservers with a --checkpoint-dir checkpoint at every multiple of N steps, all at the "
          "same version, and the master saves the data position with it (0: off)")
      ->capture_default_str();
  create
      ->add_option("--nonfinite", f->nonfinite,
                   "a gradient with NaN or infinity: skip (the step goes on without it; logged and counted) "
                   "or error (the trainer's push fails); see docs/design-notes.md")
      ->check(CLI::IsMember({"skip", "error"}))
      ->capture_default_str();
  create
      ->add_option("--wire", f->wire,
                   "how gradients and values travel: f32; bf16 or f16 (half precision both ways); topk:R "
                   "(a push sends the fraction R of each block's largest gradients, e.g. topk:0.01) or sign "
                   "(one bit per gradient), both keeping what was not sent for the next step; per parameter "
                   "after the first, e.g. bf16,emb=f32,fc1.weight=topk:0.01 (docs/protocol.md)")
      ->capture_default_str();
  create->add_flag("--secure", f->secure,
                   "give the job its own etcd user, allowed the job's keys (its secret included) and nothing "
                   "else; run as etcd's root user, on an etcd with authentication on");
  create->add_flag(
      "--tls", f->tls,
      "the job's masters, pservers and trainers speak mutual TLS (gRPC and the TCP data plane): every "
      "process needs the job's CA and a certificate of its own (--tls-ca, --tls-cert, --tls-key; `tessera "
      "certs` makes them)");
  create->add_option(
      "--credentials-out", f->credentials_out,
      "--secure: where the job user's credentials go (mode 0600; default ./JOB.etcd-credentials)");
}

}  // namespace

void RegisterJob(CLI::App& app, int* exit_code) {
  auto* job = app.add_subcommand("job", "Create, show or delete a job's configuration in etcd");
  job->require_subcommand(1);
  auto f = std::make_shared<JobFlags>();
  auto* create = job->add_subcommand("create", "Write a new job's configuration and slot map (once)");
  AddCreateFlags(create, f.get());
  create->callback([f, exit_code] { *exit_code = RunCreate(*f); });

  auto g = std::make_shared<JobFlags>();
  auto* show = job->add_subcommand("show", "Print a job's configuration and slot map");
  AddEtcdFlags(show, &g->etcd);
  show->callback([g, exit_code] { *exit_code = RunShow(*g); });

  auto h = std::make_shared<JobFlags>();
  auto* del = job->add_subcommand("delete", "Delete every key of a job from etcd");
  AddEtcdFlags(del, &h->etcd);
  del->add_flag("--force", h->force, "delete even while pservers are registered");
  del->callback([h, exit_code] { *exit_code = RunDelete(*h); });
}

}  // namespace tessera::cli
