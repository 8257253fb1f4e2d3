// A job's submission and its JSON forms; quotas and usage as JSON (see job_spec.h).
#include "server_store/job_spec.h"

#include <algorithm>

#include "common/strings.h"
#include "server_store/json_body.h"
#include "spec/spec_json.h"
#include "tessera/params.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

const std::vector<std::string> kModels = {"mlp", "logreg", "word2vec"};

}  // namespace

Status CheckRange(const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return Status::InvalidArgument("body: field '" + field + "' must be " + std::to_string(lo) + ".." +
                                   std::to_string(hi) + " (got " + std::to_string(v) + ")");
  return Status::OK();
}

JobSpec JobSpec::FromJson(const Json& j) {
  JobSpec s;
  s.name = j.value("name", "");
  s.model = j.value("model", "");
  s.package = j.value("package", "");
  s.command = j.value("command", "");
  s.dataset = j.value("dataset", "");
  s.eval_dataset = j.value("eval_dataset", "");
  s.model_args = j.value("model_args", std::vector<std::string>{});
  s.mode = j.value("mode", "sync");
  s.optimizer = j.value("optimizer", spec::kDefaultOptimizer);
  s.passes = j.value("passes", 1);
  s.batch_size = j.value("batch_size", 64);
  s.pservers = j.value("pservers", 1);
  s.trainers = j.value("trainers", 1);
  s.trainers_min = j.value("trainers_min", s.trainers);
  s.priority = j.value("priority", int64_t{0});
  if (j.contains("spec")) {
    auto t = spec::ParseJobSpec(j["spec"].dump(), "the stored spec", spec::Where::kThisMachine);
    if (t.ok()) s.training = *t;
  }
  if (j.contains("resources")) {
    const Json& r = j["resources"];
    s.resources.cpu = r.value("cpu", 0.5);
    s.resources.memory_mb = r.value("memory_mb", int64_t{512});
    s.resources.gpus = r.value("gpus", int64_t{0});
  }
  return s;
}

spec::JobSpec JobSpec::Training(const std::string& id) const {
  if (training) {
    spec::JobSpec s = *training;
    s.name = id;
    return s;
  }
  spec::JobSpec s;
  s.name = id;
  s.masters = 1;
  s.pservers = pservers;
  s.trainers_min = trainers_min;
  s.trainers_max = trainers;
  s.mode = mode;
  s.optimizer = optimizer;
  s.passes = passes;
  s.dataset = dataset;
  s.eval_dataset = eval_dataset;
  s.batch_size = batch_size;
  s.model = model;
  s.model_args = model_args;
  return s;
}

Json JobSpec::ToJson() const {
  Json j = {
      {"name", name},
      {"dataset", dataset},
      {"mode", mode},
      {"optimizer", optimizer},
      {"passes", passes},
      {"batch_size", batch_size},
      {"pservers", pservers},
      {"trainers", trainers},
      {"trainers_min", trainers_min},
      {"priority", priority},
      {"model_args", model_args},
      {"resources", {{"cpu", resources.cpu}, {"memory_mb", resources.memory_mb}, {"gpus", resources.gpus}}}};
  if (!model.empty()) j["model"] = model;
  if (!package.empty()) j["package"] = package;
  if (!command.empty()) j["command"] = command;
  if (!eval_dataset.empty()) j["eval_dataset"] = eval_dataset;
  if (training) j["spec"] = spec::SpecJson(*training);
  return j;
}

namespace {

// What the platform decides per job whichever way it is submitted: its priority and each
// process's share of the machine.
Status ReadPlatformFields(const JsonBody& b, JobSpec* s) {
  TESSERA_ASSIGN_OR_RETURN(auto prio, b.OptionalInt("priority"));
  if (prio) TESSERA_RETURN_IF_ERROR(CheckRange("priority", *prio, -1000, 1000));
  s->priority = prio.value_or(0);
  TESSERA_ASSIGN_OR_RETURN(auto res, b.OptionalObject("resources", {"cpu", "memory_mb", "gpus"}));
  if (!res) return Status::OK();
  TESSERA_ASSIGN_OR_RETURN(auto cpu, res->OptionalNumber("cpu"));
  TESSERA_ASSIGN_OR_RETURN(auto mem, res->OptionalInt("memory_mb"));
  TESSERA_ASSIGN_OR_RETURN(auto gpus, res->OptionalInt("gpus"));
  if (cpu && !(*cpu > 0 && *cpu <= 1024))
    return Status::InvalidArgument("body.resources: cpu must be in (0, 1024]");
  if (mem) TESSERA_RETURN_IF_ERROR(CheckRange("resources.memory_mb", *mem, 1, int64_t{1} << 30));
  if (gpus) TESSERA_RETURN_IF_ERROR(CheckRange("resources.gpus", *gpus, 0, 64));
  s->resources = {cpu.value_or(0.5), mem.value_or(512), gpus.value_or(0)};
  return Status::OK();
}

// A spec's fields that the platform places itself: a submitted spec must leave them out (a job
// may not choose where its files go, which etcd it talks to, or its image).
Status CheckPlacedByThePlatform(const spec::JobSpec& t) {
  const spec::JobSpec d;
  auto refuse = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("body.spec: " + field + ": leave it out on the platform: " + why);
  };
  if (!t.store.path.empty())
    return refuse("store", "the job reads its namespace's data sets where the platform mounts them");
  if (!t.checkpoints.path.empty()) return refuse("checkpoints", "they are kept in the job's own directory");
  if (t.external_etcd() || t.etcd_members != d.etcd_members)
    return refuse("etcd", "every job gets an etcd of its own");
  if (t.tls()) return refuse("tls", "the platform does not give jobs certificates yet");
  if (t.image != d.image || t.image_pull_policy != d.image_pull_policy || t.namespace_ != d.namespace_)
    return refuse("image",
                  "the server's --k8s-image and namespace prefix decide (and namespace, image_pull_policy)");
  if (!t.resources.empty())
    return refuse("resources", "give the platform's per-process 'resources' beside 'spec'");
  if (t.http_port != d.http_port || t.port != d.port) return refuse("ports", "the platform chooses them");
  return Status::OK();
}

// A submission whose training is a whole job spec: read by the one parser (spec/job_spec.h),
// within the platform's limits; beside it only the code package, the priority and resources.
StatusOr<JobSpec> FromSpecBody(const JsonBody& b) {
  for (const char* f : {"name", "model", "command", "dataset", "eval_dataset", "model_args", "mode",
                        "optimizer", "passes", "batch_size", "pservers", "trainers", "trainers_min"})
    if (b.json().contains(f))
      return Status::InvalidArgument(std::string("body: field '") + f +
                                     "' is part of 'spec' (give the training in one of the two ways)");
  const Json& given = b.json()["spec"];
  if (!given.is_object() && !given.is_string())
    return Status::InvalidArgument("body: field 'spec' must be a job spec: an object, or its YAML as text");
  TESSERA_ASSIGN_OR_RETURN(spec::JobSpec t,
                           spec::ParseJobSpec(given.is_string() ? given.get<std::string>() : given.dump(),
                                              "body.spec", spec::Where::kThisMachine));
  TESSERA_RETURN_IF_ERROR(CheckPlacedByThePlatform(t));
  JobSpec s;
  TESSERA_ASSIGN_OR_RETURN(auto package, b.OptionalString("package"));
  s.package = package.value_or("");
  if (t.command.empty() != s.package.empty())
    return Status::InvalidArgument(
        "body: 'package' (your code) goes with spec's train.command (what runs in it); a built-in model "
        "needs "
        "neither");
  TESSERA_RETURN_IF_ERROR(ReadPlatformFields(b, &s));
  TESSERA_RETURN_IF_ERROR(CheckRange("spec.train.passes", t.passes, 1, 1000));
  TESSERA_RETURN_IF_ERROR(CheckRange("spec.train.batch_size", t.batch_size, 1, 1000000));
  TESSERA_RETURN_IF_ERROR(CheckRange("spec.pservers", t.pservers, 1, 64));
  TESSERA_RETURN_IF_ERROR(CheckRange("spec.trainers", t.trainers_max, 1, 256));
  TESSERA_RETURN_IF_ERROR(ValidateName(t.name, "job"));
  std::vector<std::string> quoted;
  for (const auto& a : t.command) quoted.push_back(ShellQuote(a));
  s.command = Join(quoted, " ");
  if (s.command.size() > 4096)
    return Status::InvalidArgument("body.spec: train.command is over 4096 characters");
  s.name = t.name;
  s.model = t.model;
  s.dataset = t.dataset;
  s.eval_dataset = t.eval_dataset;
  s.model_args = t.model_args;
  s.mode = t.mode;
  s.optimizer = t.optimizer;
  s.passes = t.passes;
  s.batch_size = t.batch_size;
  s.pservers = t.pservers;
  s.trainers = t.trainers_max;
  s.trainers_min = t.trainers_min;
  s.training = std::move(t);
  return s;
}

}  // namespace

StatusOr<JobSpec> JobSpec::FromBody(const std::string& body) {
  TESSERA_ASSIGN_OR_RETURN(
      auto b, JsonBody::Parse(body, {"name", "model", "package", "command", "dataset", "eval_dataset",
                                     "model_args", "mode", "optimizer", "passes", "batch_size", "pservers",
                                     "trainers", "trainers_min", "resources", "priority", "spec"}));
  if (b.json().contains("spec")) return FromSpecBody(b);
  JobSpec s;
  auto str = [&](const char* f, std::string* out) -> Status {
    TESSERA_ASSIGN_OR_RETURN(auto v, b.OptionalString(f));
    if (v) *out = *v;
    return Status::OK();
  };
  auto num = [&](const char* f, int* out, int lo, int hi) -> Status {
    TESSERA_ASSIGN_OR_RETURN(auto v, b.OptionalInt(f));
    if (!v) return Status::OK();
    TESSERA_RETURN_IF_ERROR(CheckRange(f, *v, lo, hi));
    *out = static_cast<int>(*v);
    return Status::OK();
  };
  for (auto [f, out] :
       std::initializer_list<std::pair<const char*, std::string*>>{{"name", &s.name},
                                                                   {"model", &s.model},
                                                                   {"package", &s.package},
                                                                   {"command", &s.command},
                                                                   {"dataset", &s.dataset},
                                                                   {"eval_dataset", &s.eval_dataset},
                                                                   {"mode", &s.mode},
                                                                   {"optimizer", &s.optimizer}})
    TESSERA_RETURN_IF_ERROR(str(f, out));
  TESSERA_RETURN_IF_ERROR(num("passes", &s.passes, 1, 1000));
  TESSERA_RETURN_IF_ERROR(num("batch_size", &s.batch_size, 1, 1000000));
  TESSERA_RETURN_IF_ERROR(num("pservers", &s.pservers, 1, 64));
  TESSERA_RETURN_IF_ERROR(num("trainers", &s.trainers, 1, 256));
  s.trainers_min = s.trainers;
  TESSERA_RETURN_IF_ERROR(num("trainers_min", &s.trainers_min, 1, 256));
  if (s.trainers_min > s.trainers)
    return Status::InvalidArgument("body: trainers_min (" + std::to_string(s.trainers_min) +
                                   ") is above trainers (" + std::to_string(s.trainers) + ")");
  TESSERA_RETURN_IF_ERROR(ReadPlatformFields(b, &s));
  TESSERA_ASSIGN_OR_RETURN(auto args, b.OptionalStrings("model_args"));
  if (args) s.model_args = *args;
  if (s.dataset.empty()) return Status::InvalidArgument("body: field 'dataset' is required");
  if (s.model.empty() == s.package.empty())
    return Status::InvalidArgument(
        "body: give either 'model' (a built-in: mlp, logreg, word2vec) or 'package' and "
        "'command' (your code)");
  if (!s.model.empty() && std::find(kModels.begin(), kModels.end(), s.model) == kModels.end()) {
    std::string near = ClosestName(s.model, kModels);
    return Status::InvalidArgument(
        "body: model '" + s.model + "' is not built in (" +
        (near.empty() ? "known: mlp, logreg, word2vec" : "did you mean '" + near + "'?") + ")");
  }
  if (!s.package.empty() && s.command.empty())
    return Status::InvalidArgument("body: a package needs its 'command', e.g. \"python3 train.py\"");
  if (s.command.size() > 4096 || s.command.find('\n') != std::string::npos)
    return Status::InvalidArgument("body: 'command' must be one line of at most 4096 characters");
  if (!s.name.empty()) TESSERA_RETURN_IF_ERROR(ValidateName(s.name, "job"));
  if (auto m = ConsistencyMode::Parse(s.mode); !m.ok())
    return Status::InvalidArgument("body: mode: " + std::string(m.status().message()));
  if (auto o = OptimizerConfig::Parse(s.optimizer); !o.ok())
    return Status::InvalidArgument("body: optimizer: " + std::string(o.status().message()));
  return s;
}

Json JobInfo::ToJson() const {
  Json j = {{"id", id},
            {"namespace", ns},
            {"name", name},
            {"owner", owner},
            {"state", state},
            {"reason", reason},
            {"backend", backend},
            {"spec", spec.ToJson()},
            {"trainers", trainers},
            {"submitted_ms", submitted_ms},
            {"workers", workers},
            {"result", result}};
  j["started_ms"] = started_ms ? Json(started_ms) : Json();
  j["ended_ms"] = ended_ms ? Json(ended_ms) : Json();
  return j;
}

Json QuotaJson(const QuotaLimits& q) {
  Json j = Json::object();
  auto put = [&](const char* k, const auto& v) {
    if (v) j[k] = *v;
  };
  put("jobs", q.jobs);
  put("trainers", q.trainers);
  put("pservers", q.pservers);
  put("cpu", q.cpu);
  put("memory_mb", q.memory_mb);
  put("gpus", q.gpus);
  put("storage_mb", q.storage_mb);
  return j;
}

StatusOr<QuotaLimits> QuotaFromBody(const std::string& body) {
  TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(body, {"jobs", "trainers", "pservers", "cpu", "memory_mb",
                                                          "gpus", "storage_mb"}));
  QuotaLimits q;
  for (auto [f, out] : std::initializer_list<std::pair<const char*, std::optional<int64_t>*>>{
           {"jobs", &q.jobs},
           {"trainers", &q.trainers},
           {"pservers", &q.pservers},
           {"memory_mb", &q.memory_mb},
           {"gpus", &q.gpus},
           {"storage_mb", &q.storage_mb}}) {
    TESSERA_ASSIGN_OR_RETURN(*out, b.OptionalInt(f));
    if (*out && **out < 0)
      return Status::InvalidArgument(std::string("body: field '") + f + "' must be 0 or more");
  }
  TESSERA_ASSIGN_OR_RETURN(q.cpu, b.OptionalNumber("cpu"));
  if (q.cpu && *q.cpu < 0) return Status::InvalidArgument("body: field 'cpu' must be 0 or more");
  return q;
}

Json UsageJson(const Usage& u) {
  return {{"jobs", u.jobs},
          {"trainers", u.trainers},
          {"pservers", u.pservers},
          {"cpu", u.resources.cpu},
          {"memory_mb", u.resources.memory_mb},
          {"gpus", u.resources.gpus}};
}

Json ParseJsonOr(const std::string& text, Json fallback) {
  Json j = Json::parse(text, nullptr, false);
  return j.is_discarded() ? fallback : j;
}

}  // namespace tessera::server
