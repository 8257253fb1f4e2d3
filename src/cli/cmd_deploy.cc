// `tessera deploy k8s`: a job spec rendered into Kubernetes manifests (and applied with kubectl
// when asked). The objects are decided in src/deploy; this file writes them and runs kubectl.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>

#include "cli/spec_flags.h"
#include "spec/spec_settings.h"
#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "common/files.h"
#include "common/process.h"
#include "deploy/k8s_manifests.h"
#include "deploy/kubectl.h"
#include "deploy/yaml_text.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

struct DeployFlags {
  std::string spec, out;
  std::vector<std::string> settings;  // --set
  bool apply = false;
  std::string kubectl = "kubectl";
};

// Only files this command writes: "NN-name.yaml" and "namespace/NN-name.yaml".
bool OursName(const std::string& name) {
  static const std::regex re("[0-9][0-9]-[-a-z0-9]+\\.yaml");
  return std::regex_match(name, re);
}

// DIR may be new, empty, or an earlier rendering: anything else in it is somebody's, and stays.
Status CheckOutDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::OK();
  if (!fs::is_directory(dir, ec))
    return Status::InvalidArgument("--out " + dir + " exists and is not a directory");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name == "namespace" && e.is_directory()) {
      for (const auto& n : fs::directory_iterator(e.path(), ec))
        if (!OursName(n.path().filename().string()))
          return Status::AlreadyExists(
              "--out " + dir + " holds " + n.path().string() +
              ", which `tessera deploy k8s` did not write; choose another directory");
      continue;
    }
    if (!OursName(name))
      return Status::AlreadyExists("--out " + dir + " holds " + e.path().string() +
                                   ", which `tessera deploy k8s` did not write; choose another directory");
  }
  return Status::OK();
}

Status Write(const std::string& dir, const std::vector<deploy::Manifest>& manifests,
             const std::string& origin) {
  std::set<std::string> written;
  for (const auto& m : manifests) {
    fs::path p = fs::path(dir) / m.file;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec) return Status::Unavailable("cannot create " + p.parent_path().string() + ": " + ec.message());
    std::string text = "# Rendered by `tessera deploy k8s` from " + origin +
                       ". Edit the spec and render again rather than this file.\n" + deploy::ToYaml(m.object);
    TESSERA_RETURN_IF_ERROR(WriteFileAtomic(p.string(), text));
    written.insert(fs::weakly_canonical(p, ec).string());
  }
  // Files of an earlier rendering that this one no longer has (say, etcd once it is external).
  for (const fs::path& d : {fs::path(dir), fs::path(dir) / "namespace"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      if (e.is_regular_file() && OursName(e.path().filename().string()) &&
          !written.count(fs::weakly_canonical(e.path(), ec).string()))
        fs::remove(e.path(), ec);
    }
  }
  return Status::OK();
}

// Applies the job with kubectl; a missing kubectl leaves the written manifests to apply elsewhere.
Status Apply(const DeployFlags& f, const spec::JobSpec& spec, std::vector<deploy::Manifest> job) {
  auto out = deploy::ApplyJob(f.kubectl, spec, std::move(job));
  if (out.status().code() == StatusCode::kNotFound)
    return Status::NotFound(std::string(out.status().message()) +
                            "; the manifests are written, apply them from a machine that has it");
  if (!out.ok()) return out.status();
  std::printf("%s", out->c_str());
  return Status::OK();
}

int RunK8s(DeployFlags f) {
  while (f.out.size() > 1 && f.out.back() == '/') f.out.pop_back();  // `--out k8s/` prints k8s/namespace
  auto file = spec::LoadSpecFile(f.spec, f.settings);
  if (!file.ok()) return Fail("deploy k8s", file.status());
  const spec::JobSpec* spec = &file->spec;
  auto job = deploy::RenderJob(*spec, file->text);
  if (!job.ok())
    return Fail("deploy k8s", Status::InvalidArgument(f.spec + ": " + std::string(job.status().message())));
  if (Status s = CheckOutDir(f.out); !s.ok()) return Fail("deploy k8s", s);
  auto all = *job;
  for (auto& m : deploy::RenderNamespaceTemplate(*spec)) all.push_back(std::move(m));
  if (Status s = Write(f.out, all, fs::path(f.spec).filename().string()); !s.ok())
    return Fail("deploy k8s", s);
  const auto& s = *spec;
  std::printf("wrote %zu objects of job %s to %s (and the namespace template to %s/namespace)\n", job->size(),
              s.name.c_str(), f.out.c_str(), f.out.c_str());
  if (!f.apply) {
    std::printf(
        "next:\n"
        "  kubectl apply -f %s/namespace     # once per namespace, as its administrator\n"
        "  kubectl apply -f %s               # the job\n"
        "  kubectl -n %s port-forward svc/%s-console %d   # the console at http://127.0.0.1:%d/\n"
        "  kubectl -n %s patch job %s-trainer --type=merge -p '{\"spec\":{\"parallelism\":%d}}'   # scale "
        "trainers\n"
        "  kubectl -n %s delete all,networkpolicy,serviceaccount,configmap,pvc -l tessera.io/job=%s   # "
        "remove it\n",
        f.out.c_str(), f.out.c_str(), s.namespace_.c_str(), s.name.c_str(), s.http_port, s.http_port,
        s.namespace_.c_str(), s.name.c_str(), s.trainers_max, s.namespace_.c_str(), s.name.c_str());
    if (s.start_pservers > 0) {
      std::printf(
          "  kubectl -n %s scale statefulset %s-pserver --replicas=%d   # pservers: 1..%d, shards move "
          "live\n",
          s.namespace_.c_str(), s.name.c_str(), s.pservers, s.pservers);
    }
    return 0;
  }
  std::fflush(stdout);
  if (Status a = Apply(f, s, *job); !a.ok()) return Fail("deploy k8s --apply", a);
  std::printf("applied; `kubectl -n %s delete configmap %s` removes the whole job\n", s.namespace_.c_str(),
              s.name.c_str());
  return 0;
}

}  // namespace

void RegisterDeploy(CLI::App& app, int* exit_code) {
  auto* deploy =
      app.add_subcommand("deploy", "Run a job beyond this machine, from one job spec (docs/deploy.md)");
  deploy->require_subcommand(1);
  auto f = std::make_shared<DeployFlags>();
  auto* k8s = deploy->add_subcommand(
      "k8s",
      "Render a job spec (YAML) into Kubernetes manifests: etcd (unless external), masters, a pserver\n"
      "StatefulSet, a trainer Job to scale, Services, probes, NetworkPolicies, a ServiceAccount, and a\n"
      "namespace template with a ResourceQuota and a LimitRange (DIR/namespace). No operator needed.");
  auto* spec_opt = k8s->add_option("--spec", f->spec, "the job spec (YAML; see deploy/examples/ and docs/deploy.md)")
                       ->required()
                       ->check(CLI::ExistingFile);
  AddSpecSettings(k8s, spec_opt, &f->settings);
  k8s->add_option(
         "--out", f->out,
         "directory for the manifests (new, empty, or an earlier rendering: nothing else in it is touched)")
      ->required();
  k8s->add_flag(
      "--apply", f->apply,
      "then apply them with kubectl (its current context), every object owned by the job's ConfigMap");
  k8s->add_option("--kubectl", f->kubectl, "the kubectl program")->capture_default_str();
  k8s->callback([f, exit_code] { *exit_code = RunK8s(*f); });
}

}  // namespace tessera::cli
