// The command line's login to a tessera server: the server's address, the user and an API token,
// kept in <config dir>/login.json with mode 0600. The config dir is $TESSERA_CONFIG_DIR, else
// $XDG_CONFIG_HOME/tessera, else $HOME/.config/tessera. Thread-safe (no shared state).
#pragma once

#include <optional>
#include <string>

#include "tessera/status.h"

namespace tessera::remote {

struct Login {
  std::string server;    // "http://127.0.0.1:8780" (scheme, host and port; no path)
  std::string user;      // who the token belongs to
  std::string token;     // an API token (POST /tokens), sent as a bearer token
  std::string token_id;  // its id, to revoke it at logout
};

// The config directory from the environment's values (empty strings when unset). Pure.
std::string ConfigDir(const std::string& tessera_config_dir, const std::string& xdg_config_home,
                      const std::string& home);
// The same, reading the environment.
std::string ConfigDirFromEnv();

// "host:port", "http://host:port/", "https://h/api/v1" -> "scheme://host:port". InvalidArgument
// for anything else (a path, a query, no host, a port out of range). Pure.
StatusOr<std::string> NormalizeServer(const std::string& address);

// The saved login, or nullopt when there is none. A file that is not a login (edited by hand,
// cut short) is an error naming the file.
StatusOr<std::optional<Login>> LoadLogin(const std::string& config_dir);
// Saves atomically, readable by the owner alone (the token is a secret).
Status SaveLogin(const std::string& config_dir, const Login& login);
// Removes the saved login; none is not an error.
Status RemoveLogin(const std::string& config_dir);

}  // namespace tessera::remote
