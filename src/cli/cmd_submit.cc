// `tessera submit`: packs the current directory (or -C DIR) as a code package, sends it, and
// submits a job that runs the given command as every trainer; or submits a built-in model
// (--model). Prints the job's id and URL; --wait waits for the end, -f follows its log.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>
#include <tuple>

#include "cli/spec_flags.h"
#include "spec/spec_settings.h"
#include "cli/commands.h"
#include "cli/remote_flags.h"
#include "cli/remote_jobs.h"
#include "cli/signals.h"
#include "common/strings.h"
#include "remote/pack.h"
#include "spec/spec_json.h"

namespace tessera::cli {
namespace {

using remote::Json;

struct SubmitFlags {
  RemoteFlags remote;
  std::string dir = ".";
  std::string model;
  std::string command;
  std::vector<std::string> args;  // the command as words after `--`
  std::string name, dataset, eval_dataset, mode, optimizer;
  int passes = 0, batch_size = 0, pservers = 0, trainers = 0, trainers_min = 0;
  double cpu = 0;
  int64_t memory_mb = 0, gpus = 0, priority = 0;
  std::vector<std::string> model_args;
  bool wait = false, follow = false;
  std::string spec_path;  // a job spec (YAML or JSON); the flags given override it
  std::vector<std::string> spec_settings;  // --set
  std::map<std::string, CLI::Option*>
      given;  // options the user gave (sent; the rest are the server's defaults)
};

bool Given(const SubmitFlags& f, const std::string& name) {
  auto it = f.given.find(name);
  return it != f.given.end() && it->second->count() > 0;
}

// The priority and each process's share, where given (else the server's defaults).
void AddPlatformFields(const SubmitFlags& f, Json* b) {
  if (Given(f, "priority")) (*b)["priority"] = f.priority;
  if (Given(f, "cpu") || Given(f, "memory_mb") || Given(f, "gpus")) {
    Json r = Json::object();
    if (Given(f, "cpu")) r["cpu"] = f.cpu;
    if (Given(f, "memory_mb")) r["memory_mb"] = f.memory_mb;
    if (Given(f, "gpus")) r["gpus"] = f.gpus;
    (*b)["resources"] = r;
  }
}

StatusOr<Json> Body(const SubmitFlags& f, const std::string& package, const std::string& command) {
  Json b = {{"dataset", f.dataset}};
  if (!f.model.empty()) b["model"] = f.model;
  if (!package.empty()) {
    b["package"] = package;
    b["command"] = command;
  }
  for (const auto& [key, value] :
       std::initializer_list<std::pair<const char*, const std::string*>>{{"name", &f.name},
                                                                         {"eval_dataset", &f.eval_dataset},
                                                                         {"mode", &f.mode},
                                                                         {"optimizer", &f.optimizer}})
    if (!value->empty()) b[key] = *value;
  for (const auto& [key, value] :
       std::initializer_list<std::pair<const char*, int>>{{"passes", f.passes},
                                                          {"batch_size", f.batch_size},
                                                          {"pservers", f.pservers},
                                                          {"trainers", f.trainers},
                                                          {"trainers_min", f.trainers_min}})
    if (Given(f, key)) b[key] = value;
  if (!f.model_args.empty()) b["model_args"] = f.model_args;
  AddPlatformFields(f, &b);
  return b;
}

// A submission of a whole spec: the spec itself (the server reads it with the same parser), the
// code package when the spec runs a command, and the platform's own fields.
StatusOr<Json> SpecBody(const SubmitFlags& f, const spec::JobSpec& t, const std::string& package) {
  Json b = {{"spec", spec::SpecJson(t)}};
  if (!package.empty()) b["package"] = package;
  AddPlatformFields(f, &b);
  return b;
}

// --spec: the spec, then each training flag given over it (as `tessera local --spec` does); the
// trainers' command given by flag replaces the spec's model, and the other way round.
StatusOr<spec::JobSpec> SpecWithFlags(const SubmitFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(auto file, spec::LoadSpecFile(f.spec_path, f.spec_settings, spec::Where::kThisMachine));
  spec::JobSpec t = std::move(file.spec);
  for (const auto& [value, field] :
       std::initializer_list<std::pair<const std::string*, std::string*>>{{&f.name, &t.name},
                                                                          {&f.dataset, &t.dataset},
                                                                          {&f.eval_dataset, &t.eval_dataset},
                                                                          {&f.mode, &t.mode},
                                                                          {&f.optimizer, &t.optimizer}})
    if (!value->empty()) *field = *value;
  if (!f.model.empty()) {
    t.model = f.model;
    t.command.clear();
  }
  if (!f.args.empty() || !f.command.empty()) {
    t.command = !f.args.empty() ? f.args : spec::ShellCommand(f.command);
    t.model.clear();
  }
  if (!f.model_args.empty()) t.model_args = f.model_args;
  for (const auto& [key, value, field] : std::initializer_list<std::tuple<const char*, int, int*>>{
           {"passes", f.passes, &t.passes},
           {"batch_size", f.batch_size, &t.batch_size},
           {"pservers", f.pservers, &t.pservers},
           {"trainers", f.trainers, &t.trainers_max},
           {"trainers_min", f.trainers_min, &t.trainers_min}})
    if (Given(f, key)) *field = value;
  if (Given(f, "trainers") && !Given(f, "trainers_min"))
    t.trainers_min = std::min(t.trainers_min, t.trainers_max);
  return t;
}

int RunSubmit(SubmitFlags& f) {
  std::atomic<bool> interrupted{false};
  remote::ApiClient* live = nullptr;
  SignalWatcher signals([&](int) {
    interrupted = true;
    if (live) live->Cancel();
  });
  std::string command = f.command;
  if (!f.args.empty()) {
    if (!command.empty())
      return FailRemote("submit", Status::InvalidArgument("give the command once: --command or after --"));
    command = spec::ShellLine(f.args);
  }
  std::optional<spec::JobSpec> whole;
  if (!f.spec_path.empty()) {
    auto t = SpecWithFlags(f);
    if (!t.ok()) return FailRemote("submit", t.status());
    whole = *t;
    command = spec::ShellLine(t->command);  // what the trainers run (empty: a built-in model)
  } else if (f.model.empty() == command.empty()) {
    return FailRemote("submit",
                      Status::InvalidArgument(
                          "give either --model NAME (a built-in model) or the command your trainers run, "
                          "e.g. `tessera submit --dataset fm -- /usr/bin/python3 train.py`"));
  } else if (f.dataset.empty()) {
    return FailRemote("submit", Status::InvalidArgument("give --dataset NAME (see `tessera datasets ls`)"));
  }
  auto r = ConnectRemote(f.remote);
  if (!r.ok()) return FailRemote("submit", r.status());
  live = r->api.get();
  std::string digest;
  if (!command.empty()) {
    std::string dir = std::filesystem::absolute(f.dir).lexically_normal().string();
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    auto pkg = remote::PackDirectory(dir);
    if (!pkg.ok()) return FailRemote("submit", pkg.status());
    for (const auto& s : pkg->skipped) std::fprintf(stderr, "tessera submit: left out %s\n", s.c_str());
    auto put = r->api->PutBytes("/api/v1/namespaces/" + r->ns + "/packages/" + pkg->sha256, pkg->bytes);
    if (!put.ok()) return FailRemote("submit", put.status());
    std::fprintf(stderr, "tessera submit: packed %d %s (%s, %s compressed) from %s\n", pkg->files,
                 pkg->files == 1 ? "file" : "files", HumanBytes(static_cast<double>(pkg->raw_bytes)).c_str(),
                 HumanBytes(static_cast<double>(pkg->bytes.size())).c_str(), dir.c_str());
    digest = pkg->sha256;
  }
  auto body = whole ? SpecBody(f, *whole, digest) : Body(f, digest, command);
  if (!body.ok()) return FailRemote("submit", body.status());
  auto job = r->api->Post("/api/v1/namespaces/" + r->ns + "/jobs", *body);
  if (!job.ok()) return FailRemote("submit", job.status());
  const std::string id = (*job)["id"].get<std::string>();
  if (f.remote.json) {
    std::printf("%s\n", job->dump(2).c_str());
  } else {
    std::printf("job %s %s\n%s/#/job/%s\n", id.c_str(), (*job)["state"].get<std::string>().c_str(),
                r->api->server().c_str(), id.c_str());
    if (!f.wait && !f.follow)
      std::printf("watch it: tessera jobs %s; its log: tessera logs -f %s%s\n", id.c_str(), id.c_str(),
                  command.empty() ? "" : " trainer-0");
  }
  std::fflush(stdout);
  if (!f.wait && !f.follow) return 0;
  return WaitForJob(*r->api, id, f.follow ? (command.empty() ? "supervisor" : "trainer-0") : "", interrupted);
}

}  // namespace

void RegisterSubmit(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SubmitFlags>();
  auto* cmd = app.add_subcommand(
      "submit",
      "Submit a job to a tessera server. With a command (after --), the current directory (or -C\n"
      "DIR) is packed and sent, and every trainer runs the command in its copy, with the job's\n"
      "TESSERA_* environment (docs/your-model.md). Left out of the package: .git, __pycache__, .venv\n"
      "and the like, and what .tesseraignore lists; at most 4 MiB compressed (data belongs in a\n"
      "data set). With --model, a built-in model trains instead. Options not given take the\n"
      "server's defaults. Examples:\n"
      "  tessera submit --dataset fm --eval-dataset fm-test --trainers 2 -- /usr/bin/python3 train.py\n"
      "  tessera submit --dataset fm --model mlp --passes 3 --wait");
  AddRemoteFlags(cmd, &f->remote);
  auto* spec_opt = cmd->add_option(
         "--spec", f->spec_path,
         "a job spec (YAML or JSON: the job.yaml of `tessera local --spec`, `launch` and `deploy k8s`;\n"
         "without store:, checkpoints:, etcd:, tls:, image: or resources:, which the platform\n"
         "places); its train.command, if any, runs in the packed directory; flags given override it")
      ->check(CLI::ExistingFile);
  AddSpecSettings(cmd, spec_opt, &f->spec_settings);
  cmd->add_option("-C,--dir", f->dir, "the directory to pack (default: the current one)");
  cmd->add_option("--command", f->command,
                  "the trainers' command, as one shell string (or give it after --)");
  cmd->add_option("command", f->args, "the trainers' command, after --");
  cmd->add_option("--model", f->model, "a built-in model instead of your code: mlp, logreg or word2vec (see `tessera local --help`)");
  cmd->add_option("--dataset", f->dataset, "the data set to train on: yours, or OWNER/NAME shared with you");
  cmd->add_option("--eval-dataset", f->eval_dataset, "a held-out data set to evaluate on after each pass");
  cmd->add_option("--name", f->name, "the job's name (its id starts with it)");
  cmd->add_option("--mode", f->mode, "sync, async or ssp:S");
  cmd->add_option("--optimizer", f->optimizer, "the pservers' optimizer, e.g. sgd:lr=0.1 or adam:lr=0.001");
  f->given["passes"] = cmd->add_option("--passes", f->passes, "passes over the data set");
  f->given["batch_size"] = cmd->add_option("--batch-size", f->batch_size, "examples per step per trainer");
  f->given["pservers"] = cmd->add_option("--pservers", f->pservers, "parameter servers");
  f->given["trainers"] = cmd->add_option("--trainers", f->trainers, "trainers (the most it runs with)");
  f->given["trainers_min"] = cmd->add_option("--trainers-min", f->trainers_min,
                                             "the fewest trainers: below --trainers, the job is elastic\n"
                                             "and may be shrunk for a job of higher priority");
  f->given["priority"] = cmd->add_option("--priority", f->priority, "-1000..1000; higher starts first");
  f->given["cpu"] = cmd->add_option("--cpu", f->cpu, "CPUs per process (default 0.5)");
  f->given["memory_mb"] =
      cmd->add_option("--memory-mb", f->memory_mb, "memory per process, MB (default 512)");
  f->given["gpus"] = cmd->add_option("--gpus", f->gpus, "GPUs per trainer");
  cmd->add_option("--model-arg", f->model_args, "a built-in model's KEY=VALUE (repeat)");
  cmd->add_flag("--wait", f->wait, "wait until the job ends; exit 0 only if it succeeded");
  cmd->add_flag("-f,--follow", f->follow,
                "follow the job's log until it ends (trainer-0's for your code);\n"
                "exit 0 only if it succeeded");
  cmd->callback([f, exit_code] { *exit_code = RunSubmit(*f); });
}

}  // namespace tessera::cli
