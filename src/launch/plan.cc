// Placement and command lines of a launched job (see plan.h).
#include "launch/plan.h"

#include <algorithm>
#include <climits>

#include "common/busy_poll.h"
#include "common/flag_names.h"
#include "common/math_threads.h"
#include "common/strings.h"

namespace tessera::launch {

using supervise::Role;

StatusOr<std::vector<NodePlan>> PlaceNodes(const spec::JobSpec& s, const std::vector<HostEntry>& hosts,
                                           bool with_etcd, const std::string& origin) {
  if (hosts.empty()) return Status::InvalidArgument(origin + ": no hosts");
  std::vector<int> load(hosts.size(), 0);
  std::vector<NodePlan> plan;
  if (with_etcd) {
    size_t at = 0;
    int listed = 0;
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (!hosts[h].roles.count(Role::kEtcd)) continue;
      if (listed++ == 0) at = h;
    }
    if (listed > 1) {
      return Status::InvalidArgument(origin + ": etcd is listed on " + std::to_string(listed) +
                                     " hosts; a launch runs one etcd member (list it once, or give --etcd)");
    }
    plan.push_back({Role::kEtcd, 0, at});
    ++load[at];
  }
  for (auto [role, count] : {std::pair{Role::kMaster, s.masters}, std::pair{Role::kPserver, s.pservers},
                             std::pair{Role::kTrainer, s.trainers_max}}) {
    for (int i = 0; i < count; ++i) {
      size_t best = hosts.size();
      for (size_t h = 0; h < hosts.size(); ++h) {
        if (hosts[h].roles.count(role) && (best == hosts.size() || load[h] < load[best])) best = h;
      }
      if (best == hosts.size()) {
        return Status::InvalidArgument(origin + ": no host may run a " + supervise::RoleName(role) +
                                       " (the job needs " + std::to_string(count) + "; add '" +
                                       supervise::RoleName(role) + "' to a line, or list no roles on it)");
      }
      plan.push_back({role, i, best});
      ++load[best];
    }
  }
  return plan;
}

std::vector<std::string> NodeArgs(const NodeArgsOptions& o) {
  std::vector<std::string> a = {
      flags::kCommandNode, flags::kRole, supervise::RoleName(o.role), flags::kEtcd, o.etcd,
      flags::kJob,         o.job};
  if (o.first_rank >= 0) a.insert(a.end(), {flags::kFirstRank, std::to_string(o.first_rank)});
  if (o.index >= 0) a.insert(a.end(), {flags::kIndex, std::to_string(o.index)});
  if (!o.advertise.empty()) a.insert(a.end(), {"--advertise", o.advertise});
  if (!o.data_dir.empty()) a.insert(a.end(), {flags::kDataDir, o.data_dir});
  if (o.stop_on_eof) a.push_back(flags::kStopOnEof);
  if (o.host_processes > 0) a.insert(a.end(), {flags::kHostProcesses, std::to_string(o.host_processes)});
  return a;
}

std::vector<std::string> MpirunArgv(const spec::JobSpec& s, const MpiOptions& m) {
  std::vector<std::string> a = {m.mpirun, "--tag-output", "--bind-to", "none"};
  if (m.hostfile.empty()) {
    a.push_back("--oversubscribe");
  } else {
    a.insert(a.end(), {"--hostfile", m.hostfile});
  }
  if (m.as_root) a.push_back("--allow-run-as-root");
  a.insert(a.end(), m.extra.begin(), m.extra.end());
  int first = 0;
  bool block = false;
  for (auto [role, count] : {std::pair{Role::kMaster, s.masters}, std::pair{Role::kPserver, s.pservers},
                             std::pair{Role::kTrainer, s.trainers_max}}) {
    if (count <= 0) continue;
    if (block) a.push_back(":");
    block = true;
    a.insert(a.end(), {"-np", std::to_string(count), m.tessera});
    NodeArgsOptions n;
    n.role = role;
    n.etcd = m.etcd;
    n.job = m.job;
    n.first_rank = first;
    for (auto& arg : NodeArgs(n)) a.push_back(std::move(arg));
    first += count;
  }
  return a;
}

StatusOr<int> RankFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = getenv(name);
    if (!v) continue;
    auto r = ParseInt64(v, name);
    if (!r.ok() || *r < 0 || *r > INT_MAX) return Status::InvalidArgument(std::string(name) + "='" + v + "' is not a rank");
    return static_cast<int>(*r);
  }
  return Status::NotFound(
      "no MPI rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK): --first-rank is for "
      "processes started by mpirun; give --index otherwise");
}

int LocalSizeFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = getenv(name);
    if (!v) continue;
    auto n = ParseInt64(v, name);
    return n.ok() && *n > 0 && *n <= INT_MAX ? static_cast<int>(*n) : 0;
  }
  return 0;
}

int ProcessesOnHost(const std::vector<NodePlan>& plan, size_t host) {
  return static_cast<int>(std::count_if(plan.begin(), plan.end(), [&](const NodePlan& p) {
    return p.host == host && p.role != supervise::Role::kEtcd;
  }));
}

namespace {

// The busy processes on this node's host: the launcher's count, else mpirun's, else 0 (unknown).
int ProcessesHere(int host_processes, const std::function<const char*(const char*)>& getenv) {
  return host_processes > 0 ? host_processes : LocalSizeFromEnvironment(getenv);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> NodeMathThreadEnv(
    int host_processes, int cores, const std::function<const char*(const char*)>& getenv) {
  return MathThreadEnv(cores, ProcessesHere(host_processes, getenv), getenv);
}

std::vector<std::pair<std::string, std::string>> NodeBusyPollEnv(
    int host_processes, int cores, const std::function<const char*(const char*)>& getenv) {
  auto spin = HostBusyPoll(-1, cores, ProcessesHere(host_processes, getenv), getenv);
  if (!spin) return {};
  return {{flags::kEnvBusyPoll, std::to_string(*spin)}};
}

std::string FailedRankLines(const std::string& out) {
  const std::string mark = "Process name: [[";
  size_t at = out.find(mark);
  if (at == std::string::npos) return "";
  // "[[8100,1],0]": job, then the rank after "],".
  size_t comma = out.find("],", at);
  size_t close = comma == std::string::npos ? comma : out.find(']', comma + 2);
  if (close == std::string::npos || close - comma > 12) return "";
  const std::string rank = out.substr(comma + 2, close - comma - 2);
  const std::string tag = "[1," + rank + "]<";
  std::vector<std::string> lines;
  for (const auto& line : Split(out, '\n')) {
    if (StartsWith(line, tag)) lines.push_back(line);
  }
  if (lines.size() > 12) lines.erase(lines.begin(), lines.end() - 12);
  std::string shown = "rank " + rank + " failed first. Its last lines:";
  for (const auto& line : lines) shown += "\n  | " + line;
  return shown;
}

std::string FirstHostInHostfile(const std::string& text) {
  for (const auto& line : Split(text, '\n')) {
    std::string words = line.substr(0, line.find('#'));
    for (char& c : words) c = c == '\t' || c == '\r' ? ' ' : c;
    auto w = Split(words, ' ');
    if (!w.empty()) return w[0];
  }
  return "";
}

std::vector<std::string> SshCommand(const SshOptions& o, const HostEntry& h, const std::string& remote_command) {
  std::vector<std::string> a = {o.ssh};
  for (const auto& opt : o.options) a.insert(a.end(), {"-o", opt});
  if (!o.identity.empty()) a.insert(a.end(), {"-i", o.identity});
  a.insert(a.end(), {"-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5", "-o",
                     "ServerAliveCountMax=6", "-p", std::to_string(h.ssh_port), h.Destination(), remote_command});
  return a;
}

}  // namespace tessera::launch
