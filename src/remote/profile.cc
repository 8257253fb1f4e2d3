// The saved login of the command line (see profile.h).
#include "remote/profile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/files.h"

namespace tessera::remote {
namespace {

std::string LoginPath(const std::string& dir) { return dir + "/login.json"; }

}  // namespace

std::string ConfigDir(const std::string& tessera_config_dir, const std::string& xdg_config_home,
                      const std::string& home) {
  if (!tessera_config_dir.empty()) return tessera_config_dir;
  if (!xdg_config_home.empty()) return xdg_config_home + "/tessera";
  return (home.empty() ? std::string(".") : home) + "/.config/tessera";
}

std::string ConfigDirFromEnv() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  return ConfigDir(env("TESSERA_CONFIG_DIR"), env("XDG_CONFIG_HOME"), env("HOME"));
}

StatusOr<std::string> NormalizeServer(const std::string& address) {
  static const std::regex re(
      R"(^(?:(https?)://)?([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\])(?::([0-9]{1,5}))?(/api/v1)?/?$)");
  std::smatch m;
  if (!std::regex_match(address, m, re))
    return Status::InvalidArgument("server address '" + address +
                                   "' is not of the form http://HOST:PORT (e.g. http://127.0.0.1:8780)");
  const std::string scheme = m[1].matched ? m[1].str() : "http";
  int port = m[3].matched ? std::atoi(m[3].str().c_str()) : (scheme == "https" ? 443 : 80);
  if (port < 1 || port > 65535)
    return Status::InvalidArgument("server address '" + address + "': port " + m[3].str() +
                                   " is out of range");
  return scheme + "://" + m[2].str() + ":" + std::to_string(port);
}

StatusOr<std::optional<Login>> LoadLogin(const std::string& config_dir) {
  const std::string path = LoginPath(config_dir);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<Login>();
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto j = nlohmann::json::parse(text, nullptr, false);
  auto field = [&](const char* name) -> std::string {
    return j.is_object() && j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : "";
  };
  Login l{field("server"), field("user"), field("token"), field("token_id")};
  if (l.server.empty() || l.token.empty())
    return Status::DataLoss(path + " is not a saved login (no server or token); run `tessera login` again");
  return std::optional<Login>(l);
}

Status SaveLogin(const std::string& config_dir, const Login& login) {
  std::error_code ec;
  std::filesystem::create_directories(config_dir, ec);
  if (ec) return Status::Unavailable("cannot create " + config_dir + ": " + ec.message());
  ::chmod(config_dir.c_str(), 0700);
  nlohmann::json j = {
      {"server", login.server}, {"user", login.user}, {"token", login.token}, {"token_id", login.token_id}};
  // The file is created readable by its owner alone before the token is written into it.
  return WriteFileAtomic(LoginPath(config_dir), j.dump(2) + "\n", 0600);
}

Status RemoveLogin(const std::string& config_dir) {
  const std::string path = LoginPath(config_dir);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return Status::Unavailable("cannot remove " + path + ": " + std::strerror(errno));
  return Status::OK();
}

}  // namespace tessera::remote
