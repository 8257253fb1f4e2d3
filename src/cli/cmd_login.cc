// `tessera signup`, `tessera login`, `tessera logout`: an account on a tessera server, and the
// API token the other remote commands use, saved in the user's config directory.
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/remote_flags.h"
#include "common/net.h"

namespace tessera::cli {
namespace {

struct LoginFlags {
  std::string server;
  std::string name;
  bool password_stdin = false;
  std::string token;
  std::string ca_cert;
};

// The password from standard input (one line) or typed at the terminal without echo.
StatusOr<std::string> ReadPassword(bool from_stdin, const std::string& prompt) {
  std::string pw;
  if (from_stdin) {
    if (!std::getline(std::cin, pw))
      return Status::InvalidArgument("--password-stdin: standard input is empty");
    if (!pw.empty() && pw.back() == '\r') pw.pop_back();
    return pw;
  }
  if (!::isatty(0))
    return Status::InvalidArgument("no terminal to ask the password on: pipe it in with --password-stdin");
  std::fprintf(stderr, "%s", prompt.c_str());
  termios old{};
  ::tcgetattr(0, &old);
  termios quiet = old;
  quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
  ::tcsetattr(0, TCSANOW, &quiet);
  const bool got = static_cast<bool>(std::getline(std::cin, pw));
  ::tcsetattr(0, TCSANOW, &old);
  std::fprintf(stderr, "\n");
  if (!got) return Status::Cancelled("no password given");
  return pw;
}

StatusOr<std::unique_ptr<remote::ApiClient>> Anonymous(const LoginFlags& f, std::string* server) {
  if (f.server.empty())
    return Status::InvalidArgument(
        "give --server http://HOST:PORT, the tessera server (or set TESSERA_SERVER)");
  TESSERA_ASSIGN_OR_RETURN(*server, remote::NormalizeServer(f.server));
  remote::ClientOptions o;
  o.server = *server;
  o.ca_file = f.ca_cert;
  return std::make_unique<remote::ApiClient>(o);
}

int RunSignup(const LoginFlags& f) {
  std::string server;
  auto api = Anonymous(f, &server);
  if (!api.ok()) return FailRemote("signup", api.status());
  auto pw = ReadPassword(f.password_stdin, "password for " + f.name + " (8 characters or more): ");
  if (!pw.ok()) return FailRemote("signup", pw.status());
  if (!f.password_stdin) {
    auto again = ReadPassword(false, "the same again: ");
    if (!again.ok()) return FailRemote("signup", again.status());
    if (*again != *pw) return FailRemote("signup", Status::InvalidArgument("the two passwords differ"));
  }
  auto r = (*api)->Post("/api/v1/signup", {{"name", f.name}, {"password", *pw}});
  if (!r.ok()) return FailRemote("signup", r.status());
  std::printf(
      "signed up as %s on %s (namespace %s)%s\nnext: tessera login --server %s %s\n", f.name.c_str(),
      server.c_str(), f.name.c_str(),
      (*r)["user"].value("approved", true) ? "" : "; an administrator must approve you before you log in",
      server.c_str(), f.name.c_str());
  return 0;
}

int RunLogin(const LoginFlags& f) {
  std::string server;
  auto api = Anonymous(f, &server);
  if (!api.ok()) return FailRemote("login", api.status());
  remote::Login saved{server, f.name, "", ""};
  if (!f.token.empty()) {
    // An API token made elsewhere (the web, another machine): checked, then kept.
    remote::ClientOptions o{server, f.token, f.ca_cert, 60};
    remote::ApiClient with(o);
    auto me = with.Get("/api/v1/me");
    if (!me.ok()) return FailRemote("login", me.status());
    saved.user = (*me)["user"].value("name", "");
    saved.token = f.token;
  } else {
    if (f.name.empty())
      return FailRemote("login",
                        Status::InvalidArgument("give your user name: tessera login --server URL NAME"));
    auto pw = ReadPassword(f.password_stdin, "password for " + f.name + " on " + server + ": ");
    if (!pw.ok()) return FailRemote("login", pw.status());
    auto session = (*api)->Post("/api/v1/login", {{"name", f.name}, {"password", *pw}});
    if (!session.ok()) return FailRemote("login", session.status());
    // The session lasts 7 days; the command line keeps an API token of its own instead, until
    // `tessera logout` revokes it. The session is revoked at once.
    remote::ClientOptions o{server, (*session)["token"].get<std::string>(), f.ca_cert, 60};
    remote::ApiClient with(o);
    auto token = with.Post("/api/v1/tokens", {{"label", "tessera login on " + HostName()}});
    if (!token.ok()) return FailRemote("login", token.status());
    (void)with.Delete("/api/v1/tokens/" + (*session)["token_id"].get<std::string>());
    saved.token = (*token)["token"].get<std::string>();
    saved.token_id = (*token)["id"].get<std::string>();
  }
  const std::string dir = remote::ConfigDirFromEnv();
  // A token this replaces is revoked, so logins do not pile up tokens.
  auto before = remote::LoadLogin(dir);
  if (Status s = remote::SaveLogin(dir, saved); !s.ok()) return FailRemote("login", s);
  if (before.ok() && before->has_value() && !(*before)->token_id.empty() && (*before)->server == server &&
      (*before)->token != saved.token) {
    remote::ApiClient old({server, (*before)->token, f.ca_cert, 10});
    (void)old.Delete("/api/v1/tokens/" + (*before)->token_id);
  }
  std::printf("logged in to %s as %s (token saved in %s/login.json)\n", server.c_str(), saved.user.c_str(),
              dir.c_str());
  return 0;
}

int RunLogout(const std::string& server, const std::string& ca_cert) {
  const std::string dir = remote::ConfigDirFromEnv();
  auto saved = remote::LoadLogin(dir);
  if (!saved.ok()) {
    // An unreadable login is removed all the same.
    (void)remote::RemoveLogin(dir);
    std::printf("removed %s/login.json\n", dir.c_str());
    return 0;
  }
  if (!saved->has_value()) {
    std::printf("not logged in\n");
    return 0;
  }
  remote::Login l = **saved;
  if (!server.empty()) {  // the same server at another address (TESSERA_SERVER, --server)
    auto s = remote::NormalizeServer(server);
    if (!s.ok()) return FailRemote("logout", s.status());
    l.server = *s;
  }
  std::string note;
  if (!l.token_id.empty()) {
    remote::ApiClient api({l.server, l.token, ca_cert, 10});
    auto r = api.Delete("/api/v1/tokens/" + l.token_id);
    if (!r.ok() && r.status().code() != StatusCode::kNotFound &&
        r.status().code() != StatusCode::kUnauthenticated)
      note = " (the server could not revoke the token: " + r.status().message() + ")";
  }
  if (Status s = remote::RemoveLogin(dir); !s.ok()) return FailRemote("logout", s);
  std::printf("logged out of %s%s\n", l.server.c_str(), note.c_str());
  return 0;
}

void AddLoginFlags(CLI::App* cmd, LoginFlags* f) {
  cmd->add_option("--server", f->server, "the tessera server, http://HOST:PORT")->envname("TESSERA_SERVER");
  cmd->add_flag("--password-stdin", f->password_stdin, "read the password from standard input (for scripts)");
  cmd->add_option("--ca-cert", f->ca_cert, "https: the CA certificate that signed the server's")
      ->envname("TESSERA_CA_CERT");
}

}  // namespace

void RegisterLogin(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<LoginFlags>();
  auto* signup =
      app.add_subcommand("signup",
                         "Create an account on a tessera server (and your namespace of the same name).\n"
                         "The first account of a server administers it.");
  AddLoginFlags(signup, f.get());
  signup->add_option("name", f->name, "user name: 1-32 of a-z 0-9 -, starting with a letter")->required();
  signup->callback([f, exit_code] { *exit_code = RunSignup(*f); });

  auto* login = app.add_subcommand(
      "login",
      "Log in to a tessera server. Keeps an API token in ~/.config/tessera/login.json (or\n"
      "$TESSERA_CONFIG_DIR) for the other commands: submit, jobs, logs, stop, scale, datasets.");
  AddLoginFlags(login, f.get());
  login->add_option("name", f->name, "your user name");
  login->add_option("--token", f->token,
                    "keep this API token (made with POST /api/v1/tokens) instead of a password");
  login->callback([f, exit_code] { *exit_code = RunLogin(*f); });

  auto* logout = app.add_subcommand("logout", "Revoke the saved token and forget it.");
  logout->add_option("--server", f->server, "the server's address, if it is not the one you logged in to")
      ->envname("TESSERA_SERVER");
  logout->add_option("--ca-cert", f->ca_cert, "https: the CA certificate that signed the server's")
      ->envname("TESSERA_CA_CERT");
  logout->callback([f, exit_code] { *exit_code = RunLogout(f->server, f->ca_cert); });
}

}  // namespace tessera::cli
