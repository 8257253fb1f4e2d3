// A job's submission and its JSON forms; quotas and usage as JSON (see submission.h).
#include "server_store/submission.h"

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

spec::JobSpec Submission::FieldFormDefaults() {
  spec::JobSpec s;
  s.masters = 1;
  return s;
}

std::string Submission::command() const { return spec::ShellLine(training.command); }

spec::JobSpec Submission::Training(const std::string& id) const {
  spec::JobSpec s = training;
  s.name = id;
  return s;
}

void Submission::ScaleTo(int trainers) {
  training.trainers_max = trainers;
  training.trainers_min = std::min(training.trainers_min, trainers);
}

Submission Submission::FromJson(const Json& j) {
  Submission s;
  if (j.contains("spec")) {
    auto t = spec::ParseJobSpec(j["spec"].dump(), "the stored spec", spec::Where::kThisMachine);
    if (t.ok()) {
      s.training = *t;
      s.whole_spec = true;
    }
  }
  spec::JobSpec& t = s.training;
  if (!s.whole_spec) {
    // The field form (and any row whose spec no longer reads): its fields over the defaults.
    t.name = j.value("name", "");
    t.model = j.value("model", "");
    const std::string command = j.value("command", "");
    if (!command.empty()) t.command = spec::ShellCommand(command);
    t.dataset = j.value("dataset", "");
    t.eval_dataset = j.value("eval_dataset", "");
    t.model_args = j.value("model_args", std::vector<std::string>{});
    t.mode = j.value("mode", t.mode);
    t.optimizer = j.value("optimizer", t.optimizer);
    t.passes = j.value("passes", t.passes);
    t.batch_size = j.value("batch_size", t.batch_size);
    t.pservers = j.value("pservers", t.pservers);
  }
  // The trainers as last asked for (an older server scaled these fields only).
  t.trainers_max = j.value("trainers", t.trainers_max);
  t.trainers_min = std::min(j.value("trainers_min", t.trainers_max), t.trainers_max);
  s.package = j.value("package", "");
  s.priority = j.value("priority", int64_t{0});
  if (j.contains("resources")) {
    const Json& r = j["resources"];
    s.resources.cpu = r.value("cpu", 0.5);
    s.resources.memory_mb = r.value("memory_mb", int64_t{512});
    s.resources.gpus = r.value("gpus", int64_t{0});
  }
  return s;
}

// The fields every reader of a job knows (the console, the CLI, the notebook client, older
// servers), and the whole spec when it was submitted as one.
Json Submission::ToJson() const {
  const spec::JobSpec& t = training;
  Json j = {
      {"name", t.name},
      {"dataset", t.dataset},
      {"mode", t.mode},
      {"optimizer", t.optimizer},
      {"passes", t.passes},
      {"batch_size", t.batch_size},
      {"pservers", t.pservers},
      {"trainers", t.trainers_max},
      {"trainers_min", t.trainers_min},
      {"priority", priority},
      {"model_args", t.model_args},
      {"resources", {{"cpu", resources.cpu}, {"memory_mb", resources.memory_mb}, {"gpus", resources.gpus}}}};
  if (!t.model.empty()) j["model"] = t.model;
  if (!package.empty()) j["package"] = package;
  if (!t.command.empty()) j["command"] = command();
  if (!t.eval_dataset.empty()) j["eval_dataset"] = t.eval_dataset;
  if (whole_spec) j["spec"] = spec::SpecJson(t);
  return j;
}

namespace {

// What the platform decides per job whichever way it is submitted: its priority and each
// process's share of the machine.
Status ReadPlatformFields(const JsonBody& b, Submission* s) {
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
StatusOr<Submission> FromSpecBody(const JsonBody& b) {
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
  Submission s;
  TESSERA_ASSIGN_OR_RETURN(auto package, b.OptionalString("package"));
  s.package = package.value_or("");
  if (t.command.empty() != s.package.empty())
    return Status::InvalidArgument(
        "body: 'package' (your code) goes with spec's train.command (what runs in it); a built-in model "
        "needs neither");
  TESSERA_RETURN_IF_ERROR(ReadPlatformFields(b, &s));
  TESSERA_RETURN_IF_ERROR(CheckRange("spec.train.passes", t.passes, 1, 1000));
  TESSERA_RETURN_IF_ERROR(CheckRange("spec.train.batch_size", t.batch_size, 1, 1000000));
  TESSERA_RETURN_IF_ERROR(CheckRange("spec.pservers", t.pservers, 1, 64));
  TESSERA_RETURN_IF_ERROR(CheckRange("spec.trainers", t.trainers_max, 1, 256));
  TESSERA_RETURN_IF_ERROR(ValidateName(t.name, "job"));
  if (spec::ShellLine(t.command).size() > 4096)
    return Status::InvalidArgument("body.spec: train.command is over 4096 characters");
  s.training = std::move(t);
  s.whole_spec = true;
  return s;
}

}  // namespace

StatusOr<Submission> Submission::FromBody(const std::string& body) {
  TESSERA_ASSIGN_OR_RETURN(
      auto b, JsonBody::Parse(body, {"name", "model", "package", "command", "dataset", "eval_dataset",
                                     "model_args", "mode", "optimizer", "passes", "batch_size", "pservers",
                                     "trainers", "trainers_min", "resources", "priority", "spec"}));
  if (b.json().contains("spec")) return FromSpecBody(b);
  Submission s;
  spec::JobSpec& t = s.training;
  std::string command;
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
       std::initializer_list<std::pair<const char*, std::string*>>{{"name", &t.name},
                                                                   {"model", &t.model},
                                                                   {"package", &s.package},
                                                                   {"command", &command},
                                                                   {"dataset", &t.dataset},
                                                                   {"eval_dataset", &t.eval_dataset},
                                                                   {"mode", &t.mode},
                                                                   {"optimizer", &t.optimizer}})
    TESSERA_RETURN_IF_ERROR(str(f, out));
  TESSERA_RETURN_IF_ERROR(num("passes", &t.passes, 1, 1000));
  TESSERA_RETURN_IF_ERROR(num("batch_size", &t.batch_size, 1, 1000000));
  TESSERA_RETURN_IF_ERROR(num("pservers", &t.pservers, 1, 64));
  TESSERA_RETURN_IF_ERROR(num("trainers", &t.trainers_max, 1, 256));
  t.trainers_min = t.trainers_max;
  TESSERA_RETURN_IF_ERROR(num("trainers_min", &t.trainers_min, 1, 256));
  if (t.trainers_min > t.trainers_max)
    return Status::InvalidArgument("body: trainers_min (" + std::to_string(t.trainers_min) +
                                   ") is above trainers (" + std::to_string(t.trainers_max) + ")");
  TESSERA_RETURN_IF_ERROR(ReadPlatformFields(b, &s));
  TESSERA_ASSIGN_OR_RETURN(auto args, b.OptionalStrings("model_args"));
  if (args) t.model_args = *args;
  if (t.dataset.empty()) return Status::InvalidArgument("body: field 'dataset' is required");
  if (t.model.empty() == s.package.empty())
    return Status::InvalidArgument(
        "body: give either 'model' (a built-in: mlp, logreg, word2vec) or 'package' and "
        "'command' (your code)");
  if (!t.model.empty() && std::find(kModels.begin(), kModels.end(), t.model) == kModels.end()) {
    std::string near = ClosestName(t.model, kModels);
    return Status::InvalidArgument(
        "body: model '" + t.model + "' is not built in (" +
        (near.empty() ? "known: mlp, logreg, word2vec" : "did you mean '" + near + "'?") + ")");
  }
  if (s.package.empty() && !command.empty())
    return Status::InvalidArgument(
        "body: 'command' runs your code: it goes with 'package', not with 'model'");
  if (!s.package.empty() && command.empty())
    return Status::InvalidArgument("body: a package needs its 'command', e.g. \"python3 train.py\"");
  if (command.size() > 4096 || command.find('\n') != std::string::npos)
    return Status::InvalidArgument("body: 'command' must be one line of at most 4096 characters");
  if (!s.package.empty()) t.command = spec::ShellCommand(command);
  if (!t.name.empty()) TESSERA_RETURN_IF_ERROR(ValidateName(t.name, "job"));
  if (auto m = ConsistencyMode::Parse(t.mode); !m.ok())
    return Status::InvalidArgument("body: mode: " + std::string(m.status().message()));
  if (auto o = OptimizerConfig::Parse(t.optimizer); !o.ok())
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
