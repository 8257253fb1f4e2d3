// Preflight checks of `tessera local` (see preflight.h).
#include "local/preflight.h"

#include <cstdlib>

#include "common/busy_poll.h"
#include "common/strings.h"
#include "dataset/dataset.h"
#include "models/model.h"

namespace tessera::local {
namespace {

Status InRange(const char* flag, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return Status::OK();
  return Status::InvalidArgument(
      std::string(flag) + " must be " +
      (hi == INT32_MAX ? "at least " + std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi)) +
      ", not " + std::to_string(value));
}

}  // namespace

StatusOr<JobConfig> LocalJobConfig(const LocalOptions& o) { return spec::JobConfigOf(o.spec); }

Status CheckLocalOptions(const LocalOptions& o) {
  if (o.spec.model.empty() == o.spec.command.empty()) {
    return Status::InvalidArgument(
        "give either --model NAME (a built-in model) or --trainer-cmd CMD (your trainer)");
  }
  if (o.spec.tls())
    return Status::InvalidArgument(
        "tls: `tessera local` runs every process on this machine and cannot give them the job's "
        "certificates; remove tls: from the spec for a local run, or run it with `tessera launch`");
  TESSERA_RETURN_IF_ERROR(ValidateName(o.spec.name, "--job"));
  if (o.secure_etcd && o.spec.external_etcd())
    return Status::InvalidArgument(
        "--secure-etcd secures the etcd `tessera local` starts; an etcd given with --etcd is secured by its "
        "administrator (`tessera job create --secure` makes the job's user there)");
  TESSERA_RETURN_IF_ERROR(InRange("--pservers", o.spec.pservers, 1, 4096));
  TESSERA_RETURN_IF_ERROR(InRange("--trainers", o.spec.trainers_max, 1, 1000));
  TESSERA_RETURN_IF_ERROR(InRange("--min-trainers", o.spec.trainers_min, 1, o.spec.trainers_max));
  TESSERA_RETURN_IF_ERROR(InRange("--standby-masters", o.spec.masters - 1, 0, 10));
  TESSERA_RETURN_IF_ERROR(InRange("--passes", o.spec.passes, 1, INT32_MAX));
  TESSERA_RETURN_IF_ERROR(InRange("--batch-size", o.spec.batch_size, 1, INT32_MAX));
  TESSERA_RETURN_IF_ERROR(InRange("--chunks-per-task", o.spec.chunks_per_task, 0, INT32_MAX));
  TESSERA_RETURN_IF_ERROR(InRange("--max-failures", o.spec.max_failures, 0, INT32_MAX));
  TESSERA_RETURN_IF_ERROR(InRange("--lease-ttl", o.spec.lease_ttl, 1, 3600));
  TESSERA_RETURN_IF_ERROR(InRange("--checkpoint-steps", o.spec.checkpoint_steps, 0, INT64_MAX));
  // The children would each refuse a bad one, over and over as they are restarted.
  if (o.busy_poll_us < 0) TESSERA_RETURN_IF_ERROR(BusyPollFromEnvironment(::getenv).status());
  if (o.follow && o.spec.passes != 1) {
    return Status::InvalidArgument(
        "--follow trains once on each record as it lands: --passes must be 1, not " +
        std::to_string(o.spec.passes));
  }
  if (o.follow && o.spec.checkpoint_steps > 0)
    return Status::InvalidArgument(
        "--follow cannot be combined with --checkpoint-steps (consistent checkpoints)");
  if (!(o.spec.task_timeout > 0)) {
    return Status::InvalidArgument("--task-timeout must be a positive number of seconds, not " +
                                   std::to_string(o.spec.task_timeout));
  }
  if (!(o.spec.checkpoint_every >= 0)) {
    return Status::InvalidArgument("--checkpoint-every must be >= 0 seconds, not " +
                                   std::to_string(o.spec.checkpoint_every));
  }
  TESSERA_RETURN_IF_ERROR(LocalJobConfig(o).status());
  if (o.spec.dataset.empty())
    return Status::InvalidArgument("--dataset is required (the data set to train on)");
  TESSERA_ASSIGN_OR_RETURN(dataset::Manifest train, dataset::FindDataset(o.spec.store.path, o.spec.dataset));
  std::optional<dataset::Manifest> eval;
  if (!o.spec.eval_dataset.empty()) {
    TESSERA_ASSIGN_OR_RETURN(eval, dataset::FindDataset(o.spec.store.path, o.spec.eval_dataset));
  }
  if (!o.spec.command.empty()) {
    if (!o.spec.model_args.empty()) {
      return Status::InvalidArgument(
          "--model-arg sets a built-in model's settings; with --trainer-cmd, pass "
          "settings to your own program");
    }
    return Status::OK();
  }
  TESSERA_ASSIGN_OR_RETURN(const models::ModelInfo* model, models::FindModel(o.spec.model));
  models::ModelOptions mo;
  mo.batch_size = o.spec.batch_size;
  TESSERA_ASSIGN_OR_RETURN(mo.args, models::ParseModelArgs(o.spec.model_args));
  TESSERA_RETURN_IF_ERROR(models::CheckModelArgs(*model, mo.args));
  TESSERA_RETURN_IF_ERROR(models::CheckModelData(*model, mo, train, "training data set"));
  if (eval) TESSERA_RETURN_IF_ERROR(models::CheckModelData(*model, mo, *eval, "evaluation data set"));
  return Status::OK();
}

}  // namespace tessera::local
