// Preflight checks of `tessera local` (see preflight.h).
#include "local/preflight.h"

#include "local/spec_options.h"
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

StatusOr<JobConfig> LocalJobConfig(const LocalOptions& o) { return spec::JobConfigOf(SpecOf(o)); }

Status CheckLocalOptions(const LocalOptions& o) {
  if (o.model.empty() == o.trainer_cmd.empty()) {
    return Status::InvalidArgument(
        "give either --model NAME (a built-in model) or --trainer-cmd CMD (your trainer)");
  }
  TESSERA_RETURN_IF_ERROR(ValidateName(o.job, "--job"));
  if (o.secure_etcd && !o.etcd.empty())
    return Status::InvalidArgument(
        "--secure-etcd secures the etcd `tessera local` starts; an etcd given with --etcd is secured by its "
        "administrator (`tessera job create --secure` makes the job's user there)");
  TESSERA_RETURN_IF_ERROR(InRange("--pservers", o.pservers, 1, 4096));
  TESSERA_RETURN_IF_ERROR(InRange("--trainers", o.trainers, 1, 1000));
  TESSERA_RETURN_IF_ERROR(InRange("--min-trainers", o.min_trainers, 0, o.trainers));
  TESSERA_RETURN_IF_ERROR(InRange("--standby-masters", o.standby_masters, 0, 10));
  TESSERA_RETURN_IF_ERROR(InRange("--passes", o.passes, 1, INT32_MAX));
  TESSERA_RETURN_IF_ERROR(InRange("--batch-size", o.batch_size, 1, INT32_MAX));
  TESSERA_RETURN_IF_ERROR(InRange("--chunks-per-task", o.chunks_per_task, 0, INT32_MAX));
  TESSERA_RETURN_IF_ERROR(InRange("--max-failures", o.max_failures, 0, INT32_MAX));
  TESSERA_RETURN_IF_ERROR(InRange("--lease-ttl", o.lease_ttl_seconds, 1, 3600));
  TESSERA_RETURN_IF_ERROR(InRange("--checkpoint-steps", o.checkpoint_steps, 0, INT64_MAX));
  // The children would each refuse a bad one, over and over as they are restarted.
  if (o.busy_poll_us < 0) TESSERA_RETURN_IF_ERROR(BusyPollFromEnvironment(::getenv).status());
  if (o.follow && o.passes != 1) {
    return Status::InvalidArgument(
        "--follow trains once on each record as it lands: --passes must be 1, not " +
        std::to_string(o.passes));
  }
  if (o.follow && o.checkpoint_steps > 0)
    return Status::InvalidArgument(
        "--follow cannot be combined with --checkpoint-steps (consistent checkpoints)");
  if (!(o.task_timeout_s > 0)) {
    return Status::InvalidArgument("--task-timeout must be a positive number of seconds, not " +
                                   std::to_string(o.task_timeout_s));
  }
  if (!(o.checkpoint_every >= 0)) {
    return Status::InvalidArgument("--checkpoint-every must be >= 0 seconds, not " +
                                   std::to_string(o.checkpoint_every));
  }
  TESSERA_RETURN_IF_ERROR(LocalJobConfig(o).status());
  if (o.dataset.empty()) return Status::InvalidArgument("--dataset is required (the data set to train on)");
  TESSERA_ASSIGN_OR_RETURN(dataset::Manifest train, dataset::FindDataset(o.store, o.dataset));
  std::optional<dataset::Manifest> eval;
  if (!o.eval_dataset.empty()) {
    TESSERA_ASSIGN_OR_RETURN(eval, dataset::FindDataset(o.store, o.eval_dataset));
  }
  if (!o.trainer_cmd.empty()) {
    if (!o.model_args.empty()) {
      return Status::InvalidArgument(
          "--model-arg sets a built-in model's settings; with --trainer-cmd, pass "
          "settings to your own program");
    }
    return Status::OK();
  }
  TESSERA_ASSIGN_OR_RETURN(const models::ModelInfo* model, models::FindModel(o.model));
  models::ModelOptions mo;
  mo.batch_size = o.batch_size;
  TESSERA_ASSIGN_OR_RETURN(mo.args, models::ParseModelArgs(o.model_args));
  TESSERA_RETURN_IF_ERROR(models::CheckModelArgs(*model, mo.args));
  TESSERA_RETURN_IF_ERROR(models::CheckModelData(*model, mo, train, "training data set"));
  if (eval) TESSERA_RETURN_IF_ERROR(models::CheckModelData(*model, mo, *eval, "evaluation data set"));
  return Status::OK();
}

}  // namespace tessera::local
