// `tessera version` and `tessera status`: what is registered for a job in etcd (with each
// pserver's data-plane endpoints and the transport each trainer uses to each pserver).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "client/master_client.h"
#include "common/http_access.h"
#include "common/strings.h"
#include "common/version.h"
#include "coord/election.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/replica_map.h"
#include "job/replica_view.h"

namespace tessera::cli {
namespace {

struct StatusFlags {
  EtcdFlags etcd;
  bool json = false;
};

// The data plane of a member, from its registration: what a pserver serves ("tcp 127.0.0.1:4100,
// shm @tessera-shm-..., grpc ...") and what a trainer uses ("shm to pserver 0, tcp to pserver 1").
std::string DataPlane(const std::string& value) {
  auto j = nlohmann::json::parse(value, nullptr, false);
  if (!j.is_object()) return "";
  std::string out;
  if (j.contains("endpoints") && j["endpoints"].is_object()) {
    for (const auto& [k, v] : j["endpoints"].items()) {
      if (v.is_string()) out += (out.empty() ? "serves " : ", ") + k + " " + v.get<std::string>();
    }
  } else if (j.contains("transport") && j["transport"].is_object()) {
    for (const auto& [k, v] : j["transport"].items()) {
      if (v.is_string()) out += (out.empty() ? "uses " : ", ") + v.get<std::string>() + " to pserver " + k;
    }
    if (j.contains("transport_wanted") && j["transport_wanted"].is_string())
      out += " (asked for " + j["transport_wanted"].get<std::string>() + ")";
  }
  return out;
}

void PrintMembers(const char* title, const MemberList& list) {
  if (list.members.empty()) {
    std::printf("%s: none registered\n", title);
    return;
  }
  std::printf("%s (%zu):\n", title, list.members.size());
  for (const auto& m : list.members) {
    std::printf("  %-12s epoch %-8lld %s\n", m.name.c_str(), static_cast<long long>(m.epoch),
                m.value.c_str());
    std::string dp = DataPlane(m.value);
    if (!dp.empty()) std::printf("  %-12s data plane: %s\n", "", dp.c_str());
  }
}

nlohmann::json MembersJson(const MemberList& list) {
  auto arr = nlohmann::json::array();
  for (const auto& m : list.members) {
    nlohmann::json v = nlohmann::json::parse(m.value, nullptr, false);
    arr.push_back(
        {{"name", m.name}, {"epoch", m.epoch}, {"value", v.is_discarded() ? nlohmann::json(m.value) : v}});
  }
  return arr;
}

// The leading master's task-queue summary, indented under the "master:" line.
// The console's address from the master's registration; off loopback, with the job's console
// token (common/http_access.h), so the link opens it.
void PrintConsoleLink(const std::string& registration, const security::JobSecret& secret) {
  auto j = nlohmann::json::parse(registration, nullptr, false);
  if (j.is_discarded() || !j.contains("console")) return;
  std::string url = j["console"].get<std::string>();
  const size_t host_at = url.find("://") == std::string::npos ? 0 : url.find("://") + 3;
  const std::string host_port = url.substr(host_at, url.find('/', host_at) - host_at);
  const std::string host = host_port.substr(0, host_port.rfind(':'));
  if (!IsLoopbackHost(host) && !secret.empty()) url += "?token=" + secret.ConsoleToken();
  std::printf("  console: %s\n", url.c_str());
}

void PrintMasterStatus(etcd::EtcdClient& etcd, const std::string& job_name, const etcd::RangeResult& config,
                       const EtcdFlags& flags, const std::string& registration) {
  if (config.kvs.empty()) return;
  auto job = JobConfig::FromJson(config.kvs[0].value);
  if (!job.ok()) return;
  auto secret = LoadJobSecret(&etcd, job_name, *job, flags.secret_file);
  if (!secret.ok()) {
    std::printf("  (task status unavailable: %s)\n", secret.status().message().c_str());
    return;
  }
  PrintConsoleLink(registration, *secret);
  auto tls = LoadJobTls(job_name, *job, flags.tls_ca, flags.tls_cert, flags.tls_key);
  if (!tls.ok()) {
    std::printf("  (task status unavailable: %s)\n", tls.status().message().c_str());
    return;
  }
  master::MasterClient mc(&etcd, job_name, job->token, *secret, *tls);
  auto st = mc.GetStatus(Deadline(std::chrono::seconds(3)));
  if (!st.ok()) {
    std::printf("  (task status unavailable: %s)\n", st.status().message().c_str());
    return;
  }
  std::printf(
      "  data set %s, pass %d of %d%s: tasks %lld todo, %lld pending, %lld done, %lld failed "
      "(%lld handed out, %lld repeated, %lld timed out, %lld split for idle trainers)\n",
      st->dataset().c_str(), st->pass() + 1, st->passes(), st->finished() ? " (finished)" : "",
      static_cast<long long>(st->todo()), static_cast<long long>(st->pending()),
      static_cast<long long>(st->done()), static_cast<long long>(st->failed()),
      static_cast<long long>(st->dispatches()), static_cast<long long>(st->duplicates()),
      static_cast<long long>(st->timeouts()), static_cast<long long>(st->splits()));
  for (const auto& ft : st->failed_tasks()) {
    std::printf("  failed task %lld (pass %d, %d failures): %s\n", static_cast<long long>(ft.id()),
                ft.pass() + 1, ft.failures(), ft.reason().c_str());
  }
}

// What `tessera status` shows of a job, read from etcd.
struct JobView {
  etcd::ServerStatus etcd;
  MemberList pservers, trainers, hosts;
  std::optional<Member> leader;
  etcd::RangeResult config;
  std::optional<JobConfig> job;        // the configuration, when present and readable
  std::optional<ReplicaMap> replicas;  // a job with replicas: which host holds each shard
  bool elastic = false;
  PserverHosts host_states;  // pserver hosts registered, and those handing their shards over
};

StatusOr<JobView> ReadJobView(etcd::EtcdClient& etcd, const StatusFlags& f) {
  JobView v;
  const std::string& job = f.etcd.job;
  TESSERA_ASSIGN_OR_RETURN(
      v.etcd, etcd.Ping(std::chrono::milliseconds(static_cast<int64_t>(f.etcd.timeout_s * 1000))));
  TESSERA_ASSIGN_OR_RETURN(v.pservers, Registry(&etcd, keys::PserverPrefix(job)).List());
  TESSERA_ASSIGN_OR_RETURN(v.trainers, Registry(&etcd, keys::TrainerPrefix(job)).List());
  TESSERA_ASSIGN_OR_RETURN(v.leader, Election::Leader(&etcd, keys::MasterElectionPrefix(job)));
  TESSERA_ASSIGN_OR_RETURN(v.config, etcd.Get(keys::Config(job)));
  TESSERA_ASSIGN_OR_RETURN(v.hosts, Registry(&etcd, keys::PserverHostPrefix(job)).List());
  TESSERA_ASSIGN_OR_RETURN(auto map_kv, etcd.Get(keys::ReplicaMap(job)));
  if (!map_kv.kvs.empty()) {
    auto m = ReplicaMap::FromJson(map_kv.kvs[0].value);
    if (!m.ok()) return m.status().WithContext(keys::ReplicaMap(job));
    v.replicas = *m;
  }
  if (!v.config.kvs.empty()) {
    auto jc = JobConfig::FromJson(v.config.kvs[0].value);
    v.elastic = jc.ok() && jc->initial_pservers > 0;
    if (jc.ok()) v.job = *jc;
  }
  std::vector<std::pair<std::string, std::string>> registrations;
  for (const auto& m : v.hosts.members) registrations.emplace_back(m.name, m.value);
  v.host_states = ParseHosts(registrations);
  return v;
}

void PrintJobJson(const StatusFlags& f, const JobView& v) {
  nlohmann::json out;
  out["job"] = f.etcd.job;
  out["etcd"] = {{"endpoint", v.etcd.endpoint}, {"version", v.etcd.version}, {"revision", v.etcd.revision}};
  out["configured"] = !v.config.kvs.empty();
  if (v.job) {
    out["mode"] = v.job->mode.ToString();
    out["optimizer"] = v.job->optimizer.ToString();
    out["wire"] = v.job->wire.ToString();
  }
  out["master"] = v.leader ? nlohmann::json{{"epoch", v.leader->epoch}, {"value", v.leader->value}}
                           : nlohmann::json(nullptr);
  out["pservers"] = MembersJson(v.pservers);
  out["trainers"] = MembersJson(v.trainers);
  if (v.replicas) {
    out["pserver_hosts"] = MembersJson(v.hosts);
    out["replicas"] = nlohmann::json::parse(v.replicas->ToJson());
    auto shards = nlohmann::json::array();
    for (const auto& s : ViewShards(*v.replicas, v.host_states.live, v.host_states.leaving, v.elastic)) {
      shards.push_back(
          {{"shard", s.shard}, {"primary", s.primary}, {"backups", s.backups}, {"state", s.state}});
      if (s.moving_to >= 0) shards.back()["moving_to"] = s.moving_to;
    }
    out["shards"] = shards;
  }
  std::cout << out.dump(2) << "\n";
}

void PrintShards(const JobView& v) {
  std::printf("replicas: %d copies of each shard wanted (replica map epoch %lld)\n", v.replicas->replicas(),
              static_cast<long long>(v.replicas->epoch()));
  for (const auto& s : ViewShards(*v.replicas, v.host_states.live, v.host_states.leaving, v.elastic)) {
    std::string backups;
    for (int b : s.backups) backups += (backups.empty() ? "host " : ", ") + std::to_string(b);
    std::string state = s.state;
    if (s.state == "moving") state = "moving to host " + std::to_string(s.moving_to);
    if (s.state == "copying") state = "copying: a live host is getting the missing copy";
    if (s.state == "under-replicated") state = "under-replicated: no free host for the missing copy";
    if (s.state == "failing over") state = "failing over: a holder's host is gone";
    std::printf("  shard %d: primary on host %d, backups on %s; %s\n", s.shard, s.primary,
                backups.empty() ? "none" : backups.c_str(), state.c_str());
  }
}

int RunStatus(const StatusFlags& f) {
  auto client = ConnectEtcd(f.etcd);
  if (!client.ok()) return Fail("status", client.status());
  auto& etcd = **client;
  auto view = ReadJobView(etcd, f);
  if (!view.ok()) return Fail("status", view.status());
  const JobView& v = *view;
  if (f.json) {
    PrintJobJson(f, v);
    return 0;
  }
  std::printf("job %s (etcd %s, version %s, revision %lld)\n", f.etcd.job.c_str(), v.etcd.endpoint.c_str(),
              v.etcd.version.c_str(), static_cast<long long>(v.etcd.revision));
  if (v.job) {
    std::printf("config: %s, %s, %d pserver%s; wire %s\n", v.job->mode.ToString().c_str(),
                v.job->optimizer.ToString().c_str(), v.job->pservers, v.job->pservers == 1 ? "" : "s",
                v.job->wire.Describe().c_str());
  } else {
    std::printf("config: %s\n", v.config.kvs.empty()
                                    ? "not created (see `tessera job create`)"
                                    : "present but unreadable (`tessera job show` says why)");
  }
  if (v.leader) {
    std::printf("master: %s (epoch %lld)\n", v.leader->value.c_str(),
                static_cast<long long>(v.leader->epoch));
    PrintMasterStatus(etcd, f.etcd.job, v.config, f.etcd, v.leader->value);
  } else {
    std::printf("master: none elected\n");
  }
  PrintMembers("pservers", v.pservers);
  if (v.replicas) {
    PrintMembers("pserver hosts", v.hosts);
    PrintShards(v);
  }
  PrintMembers("trainers", v.trainers);
  return 0;
}

}  // namespace

void RegisterVersion(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("version", "Print Tessera's version");
  cmd->callback([exit_code] {
    std::printf("tessera %s\n", TESSERA_VERSION);
    *exit_code = 0;
  });
}

void RegisterStatus(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<StatusFlags>();
  auto* cmd =
      app.add_subcommand("status", "Show the members registered for a job: master, pservers, trainers");
  AddEtcdFlags(cmd, &flags->etcd);
  flags->etcd.timeout_s = 3;
  cmd->add_flag("--json", flags->json, "print JSON instead of text");
  cmd->callback([flags, exit_code] { *exit_code = RunStatus(*flags); });
}

}  // namespace tessera::cli
