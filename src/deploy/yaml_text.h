// JSON values written as block-style YAML, for manifests a person reads and kubectl applies.
// Every string is double-quoted (JSON escapes are valid YAML), so a value such as "8080", "true"
// or "1e3" can never turn into a number or a boolean on its way to the API server. Keys are plain
// where they are safe, quoted otherwise. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessera::deploy {

std::string ToYaml(const nlohmann::ordered_json& value);

}  // namespace tessera::deploy
