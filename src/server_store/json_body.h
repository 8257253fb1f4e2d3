// Reading a JSON request body strictly: it must be a JSON object; every field must be one the
// endpoint knows (an unknown one is refused, naming the likely intended field) and of the right
// type; required fields must be there. Errors are InvalidArgument saying what and where
// ("body: field 'pasword' is unknown (did you mean 'password'?)"). Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::server {

class JsonBody {
 public:
  // Parses `text`; `known` lists every field the endpoint reads.
  static StatusOr<JsonBody> Parse(const std::string& text, const std::vector<std::string>& known);

  StatusOr<std::string> String(const std::string& field) const;  // required
  StatusOr<std::optional<std::string>> OptionalString(const std::string& field) const;
  StatusOr<std::optional<int64_t>> OptionalInt(const std::string& field) const;
  StatusOr<std::optional<double>> OptionalNumber(const std::string& field) const;
  StatusOr<std::optional<bool>> OptionalBool(const std::string& field) const;
  // A nested object, read as strictly (`known`: its fields; empty: any names, as in a map).
  StatusOr<std::optional<JsonBody>> OptionalObject(const std::string& field,
                                                   const std::vector<std::string>& known) const;
  // A list of strings.
  StatusOr<std::optional<std::vector<std::string>>> OptionalStrings(const std::string& field) const;
  // The object's field names, in order.
  std::vector<std::string> Keys() const;
  const nlohmann::json& json() const { return j_; }

 private:
  static StatusOr<JsonBody> FromJson(nlohmann::json j, std::string where,
                                     const std::vector<std::string>& known);
  std::string Where(const std::string& field) const { return where_ + ": field '" + field + "'"; }
  nlohmann::json j_;
  std::string where_ = "body";
};

}  // namespace tessera::server
