// ApiRoutes: what every group of the REST API's routes shares: the caller from the bearer token,
// the permission check of a namespace, the audit line of every authenticated call, and the JSON
// reply or error. Route groups (accounts, data sets, jobs, quotas) each add their routes through
// it. Thread-safe once the routes are added.
#pragma once

#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "server_store/accounts.h"

namespace tessera::server {

// A reply: a JSON value (or raw bytes with their content type) and its HTTP status.
struct Reply {
  int status = 200;
  nlohmann::json body = nlohmann::json::object();
  std::string raw, content_type;
};

using Handler = std::function<StatusOr<Reply>(const User&, const httplib::Request&)>;

class ApiRoutes {
 public:
  ApiRoutes(httplib::Server* http, Accounts* accounts) : http_(http), accounts_(accounts) {}

  // An authenticated route: the handler runs for the caller; a change (any method but GET) and
  // any refusal is audited as `action`.
  void Get(const std::string& pattern, const std::string& action, Handler h);
  void Post(const std::string& pattern, const std::string& action, Handler h);
  void Put(const std::string& pattern, const std::string& action, Handler h);
  void Delete(const std::string& pattern, const std::string& action, Handler h);

  // Records a route registered on http() directly (sign-up, login, a followed log).
  void Note(const std::string& method, const std::string& pattern) { routes_.push_back({method, pattern}); }
  // Every route: its method and path pattern (a regular expression), for the API's own checks
  // (tests compare them with docs/openapi.json).
  const std::vector<std::pair<std::string, std::string>>& routes() const { return routes_; }

  // The caller of a request (Unauthenticated without a valid bearer token).
  StatusOr<User> Caller(const httplib::Request& req) const;
  // OK when the user may do `a` in `ns`; NotFound when the namespace is not theirs at all (so
  // that others' namespaces are not revealed), PermissionDenied when their role is too low.
  Status Need(const User& u, const std::string& ns, Action a) const;

  static void Send(httplib::Response& res, const StatusOr<Reply>& r);
  httplib::Server& http() { return *http_; }
  Accounts& accounts() { return *accounts_; }

 private:
  httplib::Server::Handler Wrap(const std::string& action, Handler h);
  httplib::Server* http_;
  Accounts* accounts_;
  std::vector<std::pair<std::string, std::string>> routes_;
};

// A path segment of a namespace or user name, and of a data set or job name, for route patterns.
inline constexpr const char* kNamePattern = "([a-z][a-z0-9-]{0,31})";
inline constexpr const char* kObjectPattern = "([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})";

// The error code name of a Status ("invalid_argument", ...) and its HTTP status (400, ...).
std::string ErrorCodeName(StatusCode c);
int HttpStatusOf(const Status& s);

}  // namespace tessera::server
