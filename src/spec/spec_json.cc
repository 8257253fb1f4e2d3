// A job spec as JSON in its own format (see spec_json.h).
#include "spec/spec_json.h"

namespace tessera::spec {
namespace {

using Json = nlohmann::json;

Json VolumeJson(const VolumeSpec& v) {
  Json j = {{"path", v.path}};
  if (!v.claim.empty()) j["claim"] = v.claim;
  if (!v.nfs_server.empty()) j["nfs"] = {{"server", v.nfs_server}, {"path", v.nfs_path}};
  return j;
}

Json TrainJson(const JobSpec& s) {
  Json t = {{"mode", s.mode},
            {"optimizer", s.optimizer},
            {"passes", s.passes},
            {"dataset", s.dataset},
            {"batch_size", s.batch_size},
            {"lease_ttl", s.lease_ttl},
            {"checkpoint_every", s.checkpoint_every},
            {"checkpoint_steps", s.checkpoint_steps},
            {"backup_trainers", s.backup_trainers},
            {"nonfinite", s.nonfinite},
            {"wire", s.wire},
            {"task_timeout", s.task_timeout},
            {"max_failures", s.max_failures},
            {"chunks_per_task", s.chunks_per_task},
            {"transport", s.transport}};
  if (!s.eval_dataset.empty()) t["eval_dataset"] = s.eval_dataset;
  if (!s.model.empty()) t["model"] = s.model;
  if (!s.model_args.empty()) t["model_args"] = s.model_args;
  if (!s.command.empty()) t["command"] = s.command;
  return t;
}

}  // namespace

Json SpecJson(const JobSpec& s) {
  Json j = {{"name", s.name},
            {"image", s.image},
            {"image_pull_policy", s.image_pull_policy},
            {"namespace", s.namespace_},
            {"masters", s.masters},
            {"pservers", s.pservers},
            {"replicas", s.replicas},
            {"start_pservers", s.start_pservers},
            {"trainers", {{"min", s.trainers_min}, {"max", s.trainers_max}}},
            {"train", TrainJson(s)},
            {"ports", {{"http", s.http_port}, {"data", s.port}}}};
  j["etcd"] = s.external_etcd() ? Json{{"endpoints", s.etcd_endpoints}} : Json{{"members", s.etcd_members}};
  if (!s.resources.empty()) {
    Json r = Json::object();
    for (const auto& [role, res] : s.resources) {
      Json one = Json::object();
      if (!res.cpu.empty()) one["cpu"] = res.cpu;
      if (!res.memory.empty()) one["memory"] = res.memory;
      if (res.gpus > 0) one["gpu"] = res.gpus;
      r[role] = one;
    }
    j["resources"] = r;
  }
  if (!s.store.path.empty()) j["store"] = VolumeJson(s.store);
  if (!s.checkpoints.path.empty()) j["checkpoints"] = VolumeJson(s.checkpoints);
  if (s.tls()) {
    j["tls"] = {{"path", s.tls_dir}};
    if (!s.tls_secret.empty()) j["tls"]["secret"] = s.tls_secret;
  }
  return j;
}

}  // namespace tessera::spec
