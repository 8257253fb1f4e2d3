// What every command that talks to a tessera server shares: --server, --token, --namespace and
// --ca-cert (with TESSERA_* environment equivalents) over the login `tessera login` saved, the
// client they make, and errors worded for the person at the terminal. Used only by src/cli.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "remote/api_client.h"
#include "remote/profile.h"
#include "tessera/status.h"

namespace tessera::cli {

struct RemoteFlags {
  std::string server;   // --server / TESSERA_SERVER (default: the saved login's)
  std::string token;    // --token / TESSERA_TOKEN (default: the saved login's)
  std::string ns;       // --namespace / TESSERA_NAMESPACE (default: the user's own)
  std::string ca_cert;  // --ca-cert / TESSERA_CA_CERT
  bool json = false;    // --json: print the server's JSON instead of a table
};

// Adds the flags to `cmd`; `with_json` adds --json too.
void AddRemoteFlags(CLI::App* cmd, RemoteFlags* flags, bool with_json = true);

struct Remote {
  std::unique_ptr<remote::ApiClient> api;
  std::string ns;    // the namespace to act in
  std::string user;  // from the saved login ("" when --token was given without one)
};

// The client for the flags and the saved login. FailedPrecondition, saying how to log in,
// when there is neither.
StatusOr<Remote> ConnectRemote(const RemoteFlags& flags);

// Prints "tessera <cmd>: <message>" with a hint for the usual causes (an expired token, a
// server that is not there) and returns exit code 1.
int FailRemote(const std::string& cmd, const Status& status);

// Runs `body(Remote&)` with a connection, turning its Status into the command's exit code.
template <typename F>
int WithRemote(const std::string& cmd, const RemoteFlags& flags, F body) {
  auto r = ConnectRemote(flags);
  if (!r.ok()) return FailRemote(cmd, r.status());
  Status s = body(*r);
  return s.ok() ? 0 : FailRemote(cmd, s);
}

// A wall-clock time in ms as local "YYYY-MM-DD HH:MM:SS"; "-" for 0 or less.
std::string LocalTime(int64_t ms);

// "3 s ago", "5 min ago", "2 h ago", "4 d ago" from two wall-clock times in ms. Pure.
std::string Ago(int64_t then_ms, int64_t now_ms);

// A JSON value for a table cell: "-" for null, integers as they are, other numbers to 4
// significant digits, strings unquoted. Pure.
std::string JsonValueText(const nlohmann::json& v);

// Lines of `rows` with each column as wide as its widest cell (the last one unpadded). Pure.
std::string Table(const std::vector<std::vector<std::string>>& rows);

}  // namespace tessera::cli
