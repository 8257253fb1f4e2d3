// Strict JSON request bodies (see json_body.h).
#include "server_store/json_body.h"

#include "common/strings.h"

namespace tessera::server {

StatusOr<JsonBody> JsonBody::Parse(const std::string& text, const std::vector<std::string>& known) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("body: not valid JSON");
  return FromJson(std::move(j), "body", known);
}

StatusOr<JsonBody> JsonBody::FromJson(nlohmann::json j, std::string where,
                                      const std::vector<std::string>& known) {
  JsonBody b;
  b.j_ = std::move(j);
  b.where_ = std::move(where);
  if (!b.j_.is_object()) return Status::InvalidArgument(b.where_ + ": a JSON object is expected");
  if (known.empty()) return b;
  for (const auto& [key, value] : b.j_.items()) {
    bool ok = false;
    for (const auto& k : known) ok = ok || k == key;
    if (ok) continue;
    std::string near = ClosestName(key, known);
    return Status::InvalidArgument(
        b.Where(key) + " is unknown" +
        (near.empty() ? " (known: " + Join(known, ", ") + ")" : " (did you mean '" + near + "'?)"));
  }
  return b;
}

StatusOr<std::string> JsonBody::String(const std::string& field) const {
  TESSERA_ASSIGN_OR_RETURN(auto v, OptionalString(field));
  if (!v) return Status::InvalidArgument(Where(field) + " is required");
  return *v;
}

StatusOr<std::optional<std::string>> JsonBody::OptionalString(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Status::InvalidArgument(Where(field) + " must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

StatusOr<std::optional<int64_t>> JsonBody::OptionalInt(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) return Status::InvalidArgument(Where(field) + " must be an integer");
  return std::optional<int64_t>(it->get<int64_t>());
}

StatusOr<std::optional<double>> JsonBody::OptionalNumber(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) return Status::InvalidArgument(Where(field) + " must be a number");
  return std::optional<double>(it->get<double>());
}

StatusOr<std::optional<bool>> JsonBody::OptionalBool(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return Status::InvalidArgument(Where(field) + " must be true or false");
  return std::optional<bool>(it->get<bool>());
}

StatusOr<std::optional<JsonBody>> JsonBody::OptionalObject(const std::string& field,
                                                           const std::vector<std::string>& known) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return std::optional<JsonBody>();
  if (!it->is_object()) return Status::InvalidArgument(Where(field) + " must be an object");
  TESSERA_ASSIGN_OR_RETURN(JsonBody sub, FromJson(*it, where_ + "." + field, known));
  return std::optional<JsonBody>(std::move(sub));
}

StatusOr<std::optional<std::vector<std::string>>> JsonBody::OptionalStrings(const std::string& field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return std::optional<std::vector<std::string>>();
  if (!it->is_array()) return Status::InvalidArgument(Where(field) + " must be a list of strings");
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string()) return Status::InvalidArgument(Where(field) + " must be a list of strings");
    out.push_back(v.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

std::vector<std::string> JsonBody::Keys() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : j_.items()) out.push_back(k);
  return out;
}

}  // namespace tessera::server
