// Block-style YAML from JSON (see yaml_text.h).
#include "deploy/yaml_text.h"

#include <regex>

namespace tessera::deploy {
namespace {

std::string Key(const std::string& k) {
  static const std::regex plain("[A-Za-z_][-A-Za-z0-9_./]*");
  static const std::regex words("(true|false|yes|no|on|off|null|y|n)", std::regex::icase);
  if (std::regex_match(k, plain) && !std::regex_match(k, words)) return k;
  return nlohmann::ordered_json(k).dump();
}

std::string Scalar(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.dump();  // quoted, escaped
  if (v.is_null()) return "null";
  return v.dump();
}

bool Empty(const nlohmann::ordered_json& v) { return (v.is_object() || v.is_array()) && v.empty(); }

void Write(const nlohmann::ordered_json& v, int indent, std::string* out);

// A mapping's entries at `indent`; the first line may already be started by a "- ".
void WriteObject(const nlohmann::ordered_json& v, int indent, bool first_inline, std::string* out) {
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!(first && first_inline)) *out += std::string(indent, ' ');
    first = false;
    *out += Key(it.key()) + ":";
    const auto& x = it.value();
    if (Empty(x)) {
      *out += x.is_object() ? " {}\n" : " []\n";
    } else if (x.is_object()) {
      *out += "\n";
      WriteObject(x, indent + 2, false, out);
    } else if (x.is_array()) {
      *out += "\n";
      Write(x, indent, out);  // sequences under a key stay at the key's indentation
    } else {
      *out += " " + Scalar(x) + "\n";
    }
  }
}

void Write(const nlohmann::ordered_json& v, int indent, std::string* out) {
  if (v.is_object()) return WriteObject(v, indent, false, out);
  if (!v.is_array()) {
    *out += std::string(indent, ' ') + Scalar(v) + "\n";
    return;
  }
  for (const auto& x : v) {
    *out += std::string(indent, ' ') + "-";
    if (Empty(x)) {
      *out += x.is_object() ? " {}\n" : " []\n";
    } else if (x.is_object()) {
      *out += " ";
      WriteObject(x, indent + 2, true, out);
    } else if (x.is_array()) {
      *out += "\n";
      Write(x, indent + 2, out);
    } else {
      *out += " " + Scalar(x) + "\n";
    }
  }
}

}  // namespace

std::string ToYaml(const nlohmann::ordered_json& value) {
  std::string out;
  if (Empty(value)) return value.is_object() ? "{}\n" : "[]\n";
  Write(value, 0, &out);
  return out;
}

}  // namespace tessera::deploy
