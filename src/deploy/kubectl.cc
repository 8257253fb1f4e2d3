// kubectl, run for a job (see kubectl.h).
#include "deploy/kubectl.h"

#include "common/files.h"
#include "common/process.h"
#include "deploy/yaml_text.h"

namespace tessera::deploy {

StatusOr<std::string> RunKubectl(const std::string& kubectl, const std::vector<std::string>& args,
                                 const std::string& work_dir, int timeout_s) {
  ProcessOptions o;
  o.argv = {"/usr/bin/env", kubectl};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.log_path = work_dir + "/kubectl.log";
  (void)RemoveAll(o.log_path);
  TESSERA_ASSIGN_OR_RETURN(auto p, Process::Spawn(o));
  auto code = p->Wait(std::chrono::seconds(timeout_s));
  std::string out = p->Output();
  (void)RemoveAll(o.log_path);
  if (!code)
    return Status::DeadlineExceeded("kubectl " + args[0] + " did not finish in " + std::to_string(timeout_s) +
                                    " s");
  if (*code == 127)
    return Status::NotFound("there is no " + kubectl + " to run (install kubectl, or pass --kubectl PATH)");
  if (*code != 0)
    return Status::Unavailable("kubectl " + args[0] + " failed (exit " + std::to_string(*code) + "): " + out);
  return out;
}

StatusOr<std::string> ApplyJob(const std::string& kubectl, const JobSpec& spec, std::vector<Manifest> job) {
  auto tmp = MakeTempDir("tessera-apply-");
  if (!tmp.ok()) return tmp.status();
  struct Cleanup {
    std::string d;
    ~Cleanup() { (void)RemoveAll(d); }
  } cleanup{*tmp};
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(*tmp + "/" + job[0].file, ToYaml(job[0].object)));
  TESSERA_RETURN_IF_ERROR(RunKubectl(kubectl, {"apply", "-f", *tmp + "/" + job[0].file}, *tmp).status());
  TESSERA_ASSIGN_OR_RETURN(std::string uid, RunKubectl(kubectl,
                                                       {"get", "configmap", spec.name, "-n", spec.namespace_,
                                                        "-o", "jsonpath={.metadata.uid}"},
                                                       *tmp));
  (void)RemoveAll(*tmp + "/" + job[0].file);
  while (!uid.empty() && (uid.back() == '\n' || uid.back() == '\r' || uid.back() == ' ')) uid.pop_back();
  for (size_t i = 1; i < job.size(); ++i) {
    job[i].object["metadata"]["ownerReferences"] = nlohmann::ordered_json::array(
        {{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", spec.name}, {"uid", uid}}});
    TESSERA_RETURN_IF_ERROR(WriteFileAtomic(*tmp + "/" + job[i].file, ToYaml(job[i].object)));
  }
  return RunKubectl(kubectl, {"apply", "-f", *tmp}, *tmp);
}

}  // namespace tessera::deploy
