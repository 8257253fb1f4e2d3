// ApplySettings, LoadSpecFile (see spec_settings.h).
#include "spec/spec_settings.h"

#include <yaml-cpp/yaml.h>

#include <cctype>

#include "common/files.h"
#include "common/strings.h"

namespace tessera::spec {
namespace {

Status Bad(const std::string& setting, const std::string& why) {
  return Status::InvalidArgument("--set " + setting + ": " + why);
}

// One field's keys: a.b.c, each a non-empty run of letters, digits and '_'.
StatusOr<std::vector<std::string>> FieldKeys(const std::string& setting, const std::string& field) {
  std::vector<std::string> keys = Split(field, '.', /*skip_empty=*/false);
  for (const auto& k : keys) {
    bool ok = !k.empty();
    for (char c : k) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) return Bad(setting, "the field must be keys joined by dots, as train.passes or store.path");
  }
  return keys;
}

}  // namespace

StatusOr<std::string> ApplySettings(const std::string& text, const std::vector<std::string>& settings,
                                    const std::string& origin) {
  if (settings.empty()) return text;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(origin + ":" + std::to_string(e.mark.line + 1) +
                                   ": not valid YAML: " + e.msg);
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    return Status::InvalidArgument(origin + ": a job spec is a mapping of fields, starting with name:");
  for (const std::string& setting : settings) {
    const size_t eq = setting.find('=');
    if (eq == std::string::npos) return Bad(setting, "expected FIELD=VALUE, as train.passes=3");
    TESSERA_ASSIGN_OR_RETURN(auto keys, FieldKeys(setting, setting.substr(0, eq)));
    YAML::Node value;
    try {
      value = YAML::Load(setting.substr(eq + 1));
    } catch (const YAML::ParserException& e) {
      return Bad(setting, "the value is not valid YAML: " + e.msg);
    }
    if (value.IsNull()) value = YAML::Node(setting.substr(eq + 1));  // `key=` is an empty string
    // Walk down, making the mappings a field needs; yaml-cpp's nodes share their data, so the
    // assignment below changes `root`.
    YAML::Node at = root;
    std::string path;
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      path += (path.empty() ? "" : ".") + keys[i];
      YAML::Node next = at[keys[i]];
      if (!next.IsDefined() || next.IsNull()) {
        at[keys[i]] = YAML::Node(YAML::NodeType::Map);
        next = at[keys[i]];
      } else if (!next.IsMap()) {
        return Bad(setting, path + " is a value in the spec, not a mapping of fields");
      }
      at.reset(next);
    }
    at[keys.back()] = value;
  }
  YAML::Emitter out;
  out << root;
  if (!out.good()) return Status::Internal(origin + ": writing the spec back: " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

StatusOr<SpecFile> LoadSpecFile(const std::string& path, const std::vector<std::string>& settings,
                                Where where) {
  auto read = ReadFile(path);
  if (!read.ok())
    return Status::NotFound("cannot read the job spec " + path + ": " + read.status().message());
  const std::string origin = settings.empty() ? path : path + " (with --set)";
  SpecFile f;
  TESSERA_ASSIGN_OR_RETURN(f.text, ApplySettings(*read, settings, path));
  TESSERA_ASSIGN_OR_RETURN(f.spec, ParseJobSpec(f.text, origin, where));
  return f;
}

}  // namespace tessera::spec
