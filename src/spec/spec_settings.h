// `--set FIELD=VALUE`: one field of a job spec given on the command line over the file's, the same
// words for `tessera local`, `launch`, `deploy k8s` and `submit` (`--set store.path=/data`,
// `--set train.passes=3`, `--set 'train.model_args=[hidden=32]'`). A field is the dotted path of
// its keys; the value is read as YAML (a number, a list, a mapping, or else a string). The result
// is a spec text again, so what reads a spec (the parser, the nodes of a launch reading it from
// etcd, the manifests' copy) sees the settings as if the file had them. Pure.
#pragma once

#include <string>
#include <vector>

#include "spec/job_spec.h"
#include "tessera/status.h"

namespace tessera::spec {

// `text` (YAML or JSON) with each setting applied in order (a later one wins). InvalidArgument,
// naming the setting, for one without `=`, an empty or malformed field, a field below a value that
// is not a mapping, or a value that is not valid YAML. Unknown fields are left for the parser to
// refuse by name.
StatusOr<std::string> ApplySettings(const std::string& text, const std::vector<std::string>& settings,
                                    const std::string& origin);

// The spec file at `path` with `settings` applied: its text (what a launch stores, what the
// manifests copy) and the spec parsed from it. Messages name the file, and the settings when any.
struct SpecFile {
  std::string text;
  JobSpec spec;
};
StatusOr<SpecFile> LoadSpecFile(const std::string& path, const std::vector<std::string>& settings,
                                Where where = Where::kCluster);

}  // namespace tessera::spec
