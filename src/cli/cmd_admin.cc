// The administration commands of a tessera server's command line: `tessera users` (list, approve),
// `tessera members` (list, set a role, remove), `tessera quota` (show, set) and `tessera audit`.
// Each is a thin caller of the REST API (docs/platform-api.md); the server decides who may.
#include <cstdio>
#include <functional>
#include <map>
#include <optional>

#include "cli/commands.h"
#include "cli/remote_flags.h"
#include "common/clock.h"

namespace tessera::cli {
namespace {

using remote::Json;

struct AdminFlags {
  RemoteFlags remote;
  std::vector<std::string> names;
  std::string user;
  std::string role;
  bool pending = false;
  bool server_wide = false;
  std::string action;
  int limit = 50;
  // quota set: each limit given, and those to clear.
  std::map<std::string, double> limits;
  std::vector<std::string> clear;
};

// The quota's fields, in the order they are shown; cpu is the only one that is not a whole number.
constexpr const char* kQuotaFields[] = {"jobs",      "trainers", "pservers",  "cpu",
                                        "memory_mb", "gpus",     "storage_mb"};

// Prints `answer` as JSON when asked, else the table `rows` makes of it.
Status Print(const AdminFlags& f, const Json& answer, const std::vector<std::vector<std::string>>& rows) {
  if (f.remote.json)
    std::printf("%s\n", answer.dump(2).c_str());
  else
    std::fputs(Table(rows).c_str(), stdout);
  return Status::OK();
}

Status ListUsers(Remote& r, const AdminFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(Json a, r.api->Get("/api/v1/users"));
  std::vector<std::vector<std::string>> rows = {{"USER", "ADMIN", "APPROVED", "SINCE"}};
  for (const auto& u : a["users"]) {
    const bool approved = u.value("approved", false);
    if (f.pending && approved) continue;
    rows.push_back({u.value("name", ""), u.value("admin", false) ? "yes" : "no", approved ? "yes" : "waiting",
                    LocalTime(u.value("created_ms", int64_t{0}))});
  }
  return Print(f, a, rows);
}

Status ListMembers(Remote& r, const AdminFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(Json a, r.api->Get("/api/v1/namespaces/" + r.ns + "/members"));
  std::vector<std::vector<std::string>> rows = {{"USER", "ROLE"}};
  for (const auto& m : a["members"]) rows.push_back({m.value("user", ""), m.value("role", "")});
  if (!f.remote.json) std::printf("namespace %s\n", r.ns.c_str());
  return Print(f, a, rows);
}

Status ShowQuota(Remote& r, const AdminFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(Json q, r.api->Get("/api/v1/namespaces/" + r.ns + "/quota"));
  std::vector<std::vector<std::string>> rows = {{"", "USED", "LIMIT"}};
  for (const char* k : kQuotaFields) {
    const Json& limit = q["limits"].contains(k) ? q["limits"][k] : Json();
    rows.push_back({k, JsonValueText(q["usage"].contains(k) ? q["usage"][k] : Json(0)),
                    limit.is_null() ? "none" : JsonValueText(limit)});
  }
  if (!f.remote.json) std::printf("namespace %s\n", r.ns.c_str());
  return Print(f, q, rows);
}

// The server replaces a namespace's limits whole, so the limits not named keep the values read
// just before; --clear removes one (no limit).
Status SetQuota(Remote& r, const AdminFlags& f) {
  if (f.limits.empty() && f.clear.empty())
    return Status::InvalidArgument(
        "nothing to set: give a limit (--cpu 4, --trainers 8, ...) or --clear FIELD");
  for (const auto& c : f.clear)
    if (f.limits.count(c)) return Status::InvalidArgument("--clear " + c + " and --" + c + " at once");
  TESSERA_ASSIGN_OR_RETURN(Json q, r.api->Get("/api/v1/namespaces/" + r.ns + "/quota"));
  Json limits = q.contains("limits") && q["limits"].is_object() ? q["limits"] : Json::object();
  for (const auto& [k, v] : f.limits) {
    if (std::string(k) == "cpu")
      limits[k] = v;
    else
      limits[k] = static_cast<int64_t>(v);
  }
  for (const auto& c : f.clear) limits.erase(c);
  TESSERA_ASSIGN_OR_RETURN(Json a, r.api->Put("/api/v1/namespaces/" + r.ns + "/quota", limits));
  if (f.remote.json) {
    std::printf("%s\n", a.dump(2).c_str());
    return Status::OK();
  }
  std::printf("namespace %s: quota set\n", r.ns.c_str());
  std::vector<std::vector<std::string>> rows = {{"", "LIMIT"}};
  for (const char* k : kQuotaFields)
    rows.push_back({k, a["limits"].contains(k) ? JsonValueText(a["limits"][k]) : "none"});
  std::fputs(Table(rows).c_str(), stdout);
  return Status::OK();
}

Status ShowAudit(Remote& r, const AdminFlags& f) {
  std::string path = f.server_wide ? "/api/v1/audit" : "/api/v1/namespaces/" + r.ns + "/audit";
  if (f.server_wide && !f.action.empty()) path += "?action=" + f.action;
  TESSERA_ASSIGN_OR_RETURN(Json a, r.api->Get(path));
  std::vector<std::vector<std::string>> rows = {{"TIME", "USER", "ACTION", "TARGET", "OUTCOME", "DETAIL"}};
  int shown = 0;
  for (const auto& line : a["audit"]) {
    if (!f.action.empty() && line.value("action", "") != f.action) continue;
    if (++shown > f.limit) break;
    std::string detail =
        line.contains("detail") && line["detail"].is_string() ? line["detail"].get<std::string>() : "";
    if (detail.size() > 60) detail = detail.substr(0, 57) + "...";
    rows.push_back({LocalTime(line.value("time_ms", int64_t{0})),
                    line.contains("user") && line["user"].is_string() ? line["user"].get<std::string>() : "-",
                    line.value("action", ""), line.value("target", ""), line.value("outcome", ""), detail});
  }
  return Print(f, a, rows);
}

// `sub NAME...`: `act` on each name in turn, the first failure ending the command.
void OnEachName(CLI::App* sub, const std::shared_ptr<AdminFlags>& f, int* exit_code, const std::string& what,
                std::function<Status(Remote&, const std::string&)> act) {
  sub->add_option("names", f->names, "the users' names")->required();
  sub->callback([f, exit_code, what, act] {
    *exit_code = WithRemote(what, f->remote, [&](Remote& r) -> Status {
      for (const auto& name : f->names) TESSERA_RETURN_IF_ERROR(act(r, name));
      return Status::OK();
    });
  });
}

// `tessera users` and `tessera users approve`.
void RegisterUsers(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<AdminFlags>();
  auto* cmd =
      app.add_subcommand("users",
                         "List the server's users (server administrators), or approve those that wait\n"
                         "(a server started with --require-approval).");
  AddRemoteFlags(cmd, &f->remote);
  cmd->add_flag("--pending", f->pending, "only the users waiting for approval");
  auto* approve = cmd->add_subcommand("approve", "Let users waiting for approval log in.");
  AddRemoteFlags(approve, &f->remote, false);
  OnEachName(approve, f, exit_code, "users approve", [](Remote& r, const std::string& name) -> Status {
    TESSERA_RETURN_IF_ERROR(r.api->Post("/api/v1/users/" + name + "/approve").status());
    std::printf("user %s approved\n", name.c_str());
    return Status::OK();
  });
  cmd->callback([f, exit_code, approve] {
    if (approve->parsed()) return;
    *exit_code = WithRemote("users", f->remote, [&](Remote& r) { return ListUsers(r, *f); });
  });
}

// `tessera members`, `members set` and `members remove`.
void RegisterMembers(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<AdminFlags>();
  auto* cmd =
      app.add_subcommand("members",
                         "List a namespace's members and their roles (namespace admins), or change them:\n"
                         "viewer (reads), member (also submits jobs and uploads), admin (also manages\n"
                         "members, shares data sets, reads the audit log). -n picks the namespace.");
  AddRemoteFlags(cmd, &f->remote);
  auto* set = cmd->add_subcommand("set", "Give a user a role in the namespace (adding them if need be).");
  AddRemoteFlags(set, &f->remote, false);
  set->add_option("user", f->user, "the user's name")->required();
  set->add_option("role", f->role, "viewer, member or admin")
      ->required()
      ->check(CLI::IsMember({"viewer", "member", "admin"}));
  set->callback([f, exit_code] {
    *exit_code = WithRemote("members set", f->remote, [&](Remote& r) -> Status {
      TESSERA_RETURN_IF_ERROR(
          r.api->Put("/api/v1/namespaces/" + r.ns + "/members/" + f->user, {{"role", f->role}}).status());
      std::printf("namespace %s: %s is %s\n", r.ns.c_str(), f->user.c_str(), f->role.c_str());
      return Status::OK();
    });
  });
  auto* remove = cmd->add_subcommand("remove", "Take users out of the namespace.");
  AddRemoteFlags(remove, &f->remote, false);
  OnEachName(remove, f, exit_code, "members remove", [](Remote& r, const std::string& name) -> Status {
    TESSERA_RETURN_IF_ERROR(r.api->Delete("/api/v1/namespaces/" + r.ns + "/members/" + name).status());
    std::printf("namespace %s: %s removed\n", r.ns.c_str(), name.c_str());
    return Status::OK();
  });
  cmd->callback([f, exit_code, set, remove] {
    if (set->parsed() || remove->parsed()) return;
    *exit_code = WithRemote("members", f->remote, [&](Remote& r) { return ListMembers(r, *f); });
  });
}

// `tessera quota` and `tessera quota set`.
void RegisterQuota(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<AdminFlags>();
  auto* cmd = app.add_subcommand("quota",
                                 "Show a namespace's quota and what it uses now (-n picks the namespace);\n"
                                 "`tessera quota set` changes it (server administrators).");
  AddRemoteFlags(cmd, &f->remote);
  auto* set =
      cmd->add_subcommand("set",
                          "Set limits of a namespace's quota; the limits not named stay as they are,\n"
                          "--clear FIELD removes one. Example: tessera quota set -n team --cpu 8 --gpus 0");
  AddRemoteFlags(set, &f->remote);
  for (const char* k : kQuotaFields) {
    std::string flag = std::string("--") + k;
    for (auto& c : flag)
      if (c == '_') c = '-';
    const std::string what = std::string(k) == "cpu"    ? "CPUs its jobs may use at once (fractions allowed)"
                             : std::string(k) == "jobs" ? "jobs it may have running at once"
                             : std::string(k) == "storage_mb" ? "MB of data sets, uploads and job files"
                             : std::string(k) == "memory_mb"  ? "MB of memory its jobs may use at once"
                                                              : std::string(k) + " its jobs may use at once";
    set->add_option_function<double>(
           flag, [f, k](double v) { f->limits[k] = v; }, what)
        ->check(CLI::NonNegativeNumber);
  }
  set->add_option("--clear", f->clear, "remove these limits (no limit)")
      ->check(CLI::IsMember({"jobs", "trainers", "pservers", "cpu", "memory_mb", "gpus", "storage_mb"}));
  set->callback([f, exit_code] {
    *exit_code = WithRemote("quota set", f->remote, [&](Remote& r) { return SetQuota(r, *f); });
  });
  cmd->callback([f, exit_code, set] {
    if (set->parsed()) return;
    *exit_code = WithRemote("quota", f->remote, [&](Remote& r) { return ShowQuota(r, *f); });
  });
}

// `tessera audit`.
void RegisterAudit(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<AdminFlags>();
  auto* cmd =
      app.add_subcommand("audit",
                         "Show what was done to a namespace (its jobs, data sets, uploads, members), by\n"
                         "anyone, newest first (namespace admins); --server-wide: the whole server's,\n"
                         "logins included (server administrators).");
  AddRemoteFlags(cmd, &f->remote);
  cmd->add_flag("--server-wide", f->server_wide, "the whole server's audit log");
  cmd->add_option("--action", f->action,
                  "only this action, as the log names it (login, submit job, set quota, set member, ...)");
  cmd->add_option("--limit", f->limit, "at most this many lines")
      ->check(CLI::Range(1, 500))
      ->capture_default_str();
  cmd->callback([f, exit_code] {
    *exit_code = WithRemote("audit", f->remote, [&](Remote& r) { return ShowAudit(r, *f); });
  });
}

}  // namespace

void RegisterAdmin(CLI::App& app, int* exit_code) {
  RegisterUsers(app, exit_code);
  RegisterMembers(app, exit_code);
  RegisterQuota(app, exit_code);
  RegisterAudit(app, exit_code);
}

}  // namespace tessera::cli
