// Strict JSON request bodies (see json_body.h).
#include "server/json_body.h"

#include "common/strings.h"

namespace tessera::server {

StatusOr<JsonBody> JsonBody::Parse(const std::string& text, const std::vector<std::string>& known) {
  JsonBody b;
  b.j_ = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (b.j_.is_discarded()) return Status::InvalidArgument("body: not valid JSON");
  if (!b.j_.is_object()) return Status::InvalidArgument("body: a JSON object is expected");
  for (const auto& [key, value] : b.j_.items()) {
    bool ok = false;
    for (const auto& k : known) ok = ok || k == key;
    if (ok) continue;
    std::string near = ClosestName(key, known);
    return Status::InvalidArgument("body: field '" + key + "' is unknown" +
                                   (near.empty() ? " (known: " + Join(known, ", ") + ")" : " (did you mean '" + near + "'?)"));
  }
  return b;
}

StatusOr<std::string> JsonBody::String(const std::string& field) const {
  TESSERA_ASSIGN_OR_RETURN(auto v, OptionalString(field));
  if (!v) return Status::InvalidArgument("body: field '" + field + "' is required");
  return *v;
}

StatusOr<std::optional<std::string>> JsonBody::OptionalString(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Status::InvalidArgument("body: field '" + field + "' must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

StatusOr<std::optional<int64_t>> JsonBody::OptionalInt(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) return Status::InvalidArgument("body: field '" + field + "' must be an integer");
  return std::optional<int64_t>(it->get<int64_t>());
}

}  // namespace tessera::server
