// Flags and errors of the commands that talk to a tessera server (see remote_flags.h).
#include "cli/remote_flags.h"

#include <cstdio>
#include <ctime>

#include "common/strings.h"

namespace tessera::cli {

void AddRemoteFlags(CLI::App* cmd, RemoteFlags* f, bool with_json) {
  cmd->add_option("--server", f->server,
                  "the tessera server, http://HOST:PORT (default: the one you logged in to)")
      ->envname("TESSERA_SERVER");
  cmd->add_option("--token", f->token, "an API token (default: the one `tessera login` saved)")
      ->envname("TESSERA_TOKEN");
  cmd->add_option("-n,--namespace", f->ns, "the namespace to act in (default: your own)")
      ->envname("TESSERA_NAMESPACE");
  cmd->add_option("--ca-cert", f->ca_cert, "https: the CA certificate that signed the server's")
      ->envname("TESSERA_CA_CERT");
  if (with_json) cmd->add_flag("--json", f->json, "print the server's JSON answer");
}

StatusOr<Remote> ConnectRemote(const RemoteFlags& f) {
  const std::string dir = remote::ConfigDirFromEnv();
  TESSERA_ASSIGN_OR_RETURN(auto saved, remote::LoadLogin(dir));
  remote::ClientOptions o;
  Remote r;
  o.server = f.server;
  o.token = f.token;
  if (saved) {
    if (o.server.empty()) o.server = saved->server;
    if (o.token.empty()) {
      o.token = saved->token;
      r.user = saved->user;
    }
  }
  if (o.server.empty() || o.token.empty())
    return Status::FailedPrecondition(
        "not logged in: run `tessera login --server http://HOST:PORT NAME` first (or give --server and "
        "--token)");
  TESSERA_ASSIGN_OR_RETURN(o.server, remote::NormalizeServer(o.server));
  o.ca_file = f.ca_cert;
  r.api = std::make_unique<remote::ApiClient>(o);
  r.ns = f.ns;
  if (r.ns.empty() && !r.user.empty() && o.server == saved->server) r.ns = r.user;
  if (r.ns.empty()) {
    // A token given on its own: whose it is, the server says.
    TESSERA_ASSIGN_OR_RETURN(auto me, r.api->Get("/api/v1/me"));
    r.user = me["user"].value("name", "");
    r.ns = r.user;
  }
  return r;
}

int FailRemote(const std::string& cmd, const Status& status) {
  std::string hint;
  if (status.code() == StatusCode::kUnauthenticated && cmd != "login" && cmd != "signup")
    hint =
        "\n  your token is not accepted (expired, revoked, or for another server): run `tessera login` again";
  if (status.code() == StatusCode::kUnavailable && status.message().find("cannot reach") != std::string::npos)
    hint = "\n  is `tessera server` running there? (--server or TESSERA_SERVER chooses the server)";
  std::fprintf(stderr, "tessera %s: %s%s\n", cmd.c_str(), status.message().c_str(), hint.c_str());
  return 1;
}

std::string LocalTime(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string Ago(int64_t then_ms, int64_t now_ms) {
  if (then_ms <= 0) return "-";
  const int64_t s = std::max<int64_t>(0, (now_ms - then_ms) / 1000);
  if (s < 90) return std::to_string(s) + " s ago";
  if (s < 90 * 60) return std::to_string(s / 60) + " min ago";
  if (s < 36 * 3600) return std::to_string(s / 3600) + " h ago";
  return std::to_string(s / 86400) + " d ago";
}

std::string JsonValueText(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
    return buf;
  }
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace tessera::cli
