// A local run's options from a job spec (see spec_options.h).
#include "local/spec_options.h"

#include "common/strings.h"

namespace tessera::local {

Status ApplySpec(const spec::JobSpec& s, LocalOptions* o) {
  if (s.tls())
    return Status::InvalidArgument(
        "tls: `tessera local` runs every process on this machine and cannot give them the job's "
        "certificates; remove tls: from the spec for a local run, or run it with `tessera launch`");
  o->job = s.name;
  if (s.external_etcd()) o->etcd = s.EtcdText();
  if (!s.store.path.empty()) o->store = s.store.path;
  o->dataset = s.dataset;
  o->eval_dataset = s.eval_dataset;
  o->model = s.model;
  o->trainer_cmd.clear();
  std::vector<std::string> quoted;
  for (const auto& a : s.command) quoted.push_back(ShellQuote(a));
  if (s.model.empty()) o->trainer_cmd = Join(quoted, " ");
  o->model_args = s.model_args;
  o->batch_size = s.batch_size;
  o->pservers = s.pservers;
  o->start_pservers = s.start_pservers;
  o->replicas = s.replicas;
  o->trainers = s.trainers_max;
  o->min_trainers = s.trainers_min;
  o->standby_masters = s.masters - 1;
  o->mode = s.mode;
  o->optimizer = s.optimizer;
  o->passes = s.passes;
  o->checkpoint_every = s.checkpoint_every;
  o->checkpoint_dir = s.checkpoints.path;
  o->checkpoint_steps = s.checkpoint_steps;
  o->backup_trainers = s.backup_trainers;
  o->nonfinite = s.nonfinite;
  o->task_timeout_s = s.task_timeout;
  o->max_failures = s.max_failures;
  o->chunks_per_task = s.chunks_per_task;
  o->lease_ttl_seconds = s.lease_ttl;
  o->transport = s.transport;
  return Status::OK();
}

spec::JobSpec SpecOf(const LocalOptions& o) {
  spec::JobSpec s;
  s.name = o.job;
  if (!o.etcd.empty()) s.etcd_endpoints = Split(o.etcd, ',');
  s.store.path = o.store;
  s.dataset = o.dataset;
  s.eval_dataset = o.eval_dataset;
  s.model = o.model;
  if (o.model.empty()) s.command = {"/bin/sh", "-c", o.trainer_cmd};
  s.model_args = o.model_args;
  s.batch_size = o.batch_size;
  s.pservers = o.pservers;
  s.start_pservers = o.start_pservers;
  s.replicas = o.replicas;
  s.trainers_max = o.trainers;
  s.trainers_min = o.min_trainers > 0 ? o.min_trainers : o.trainers;
  s.masters = 1 + o.standby_masters;
  s.mode = o.mode;
  s.optimizer = o.optimizer;
  s.passes = o.passes;
  s.checkpoint_every = o.checkpoint_every;
  s.checkpoints.path = o.checkpoint_dir;
  s.checkpoint_steps = o.checkpoint_steps;
  s.backup_trainers = o.backup_trainers;
  s.nonfinite = o.nonfinite;
  s.task_timeout = o.task_timeout_s;
  s.max_failures = o.max_failures;
  s.chunks_per_task = o.chunks_per_task;
  s.lease_ttl = static_cast<int>(o.lease_ttl_seconds);
  s.transport = o.transport;
  return s;
}

}  // namespace tessera::local
