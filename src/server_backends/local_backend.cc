// Jobs as `tessera local` processes on the server's machine (see local_backend.h).
#include "server_backends/local_backend.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/flag_names.h"
#include "common/strings.h"
#include "local/child_commands.h"
#include "local/supervisor.h"
#include "sandbox/confined_dir.h"
#include "sandbox/job_users.h"
#include "sandbox/sandbox_process.h"
#include "server_store/submission.h"
#include "spec/spec_json.h"
#include "supervise/python_path.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kCgroupHandle[] = "cgroup:";
// Where a sandboxed job sees its directories and data sets.
constexpr char kJobRoot[] = "/job";
constexpr char kDataRoot[] = "/data";
// What the server writes for the job (read-only to it), and the files in it.
constexpr char kControlDir[] = "control";
constexpr char kTrainersFile[] = "control/trainers";
constexpr char kLimitsFile[] = "control/limits.json";
constexpr char kSpecFileName[] = "job-spec.json";  // in the control directory
constexpr char kSupervisorLog[] = "supervisor.log";

std::string CgroupName(const std::string& id) { return "tessera-job-" + id; }

// The directory a sandbox must show for the tessera program to run (its libraries, the Python
// module and web pages beside it): two levels above the binary (build/src/tessera -> build,
// /opt/tessera/bin/tessera -> /opt/tessera); none when that is the system's own /usr.
std::string InstallRoot(const std::string& bin) {
  std::error_code ec;
  fs::path real = fs::canonical(bin, ec);
  if (ec) real = bin;
  const std::string root = real.parent_path().parent_path().string();
  if (root.empty() || root == "/" || root == "/usr" || root.rfind("/usr/", 0) == 0) return "";
  return root;
}

bool Beneath(const std::string& path, const std::string& dir) {
  return !dir.empty() && (path == dir || path.rfind(dir + "/", 0) == 0);
}

// The host's root links and directories a sandbox re-creates (Debian's merged /usr: links).
std::map<std::string, std::string> RootEntries() {
  std::map<std::string, std::string> out;
  for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    const std::string path = std::string("/") + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      out[name] = fs::read_symlink(path, ec).string();
    } else if (S_ISDIR(st.st_mode)) {
      out[name] = "";
    }
  }
  return out;
}

Status WriteServerFile(const std::string& path, const std::string& text, int mode) {
  TESSERA_RETURN_IF_ERROR(WriteFileAtomic(path, text, mode));
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0)
    return Status::Unavailable("cannot chmod " + path + ": " + std::strerror(errno));
  return Status::OK();
}

}  // namespace

LocalBackend::LocalBackend(LocalBackendOptions options) : o_(std::move(options)) {
  if (o_.sandboxed) layout_ = CgroupLayout::Detect();
}

spec::JobSpec LocalBackend::SpecOf(const JobLaunch& j, const JobPaths& p) {
  spec::JobSpec s = j.job;
  s.name = j.id;
  s.trainers_min = s.trainers_max = j.trainers;
  s.store.path = p.store;
  // Submitted field by field: no checkpoints, as always (that form cannot ask for them, and here
  // they would only fill the run directory). What the platform places is its own, whatever the
  // spec said (the submission refused it already).
  if (!j.whole_spec) s.checkpoint_every = 0;
  s.checkpoints = {};
  s.etcd_endpoints.clear();
  s.tls_dir.clear();
  if (s.model.empty())
    s.command = spec::ShellCommand("cd " + ShellQuote(p.code) + " && " + spec::ShellLine(s.command));
  return s;
}

std::vector<std::string> LocalBackend::Argv(const std::string& bin, const JobPaths& p) {
  // The server runs several jobs at once here, each of which would take the cores for its own
  // when deciding on busy polling: so none polls.
  return {bin, "local", "--spec", p.control + "/" + kSpecFileName, "--run", p.run, flags::kBusyPoll, "0"};
}

namespace {

// The job's spec, in its control directory (which the job may read, not write).
Status WriteJobSpec(const JobLaunch& j, const LocalBackend::JobPaths& as_seen) {
  std::error_code ec;
  fs::create_directories(j.dir + "/" + kControlDir, ec);
  if (ec) return Status::Unavailable("cannot create " + j.dir + "/" + kControlDir + ": " + ec.message());
  ::chmod((j.dir + "/" + kControlDir).c_str(), 0755);
  return WriteServerFile(j.dir + "/" + kControlDir + "/" + kSpecFileName,
                         spec::SpecJson(LocalBackend::SpecOf(j, as_seen)).dump(2) + "\n", 0644);
}

}  // namespace

CgroupLimits LocalBackend::LimitsOf(const JobLaunch& j, int trainers, int64_t tasks_per_process) {
  const int processes = j.job.pservers + trainers;
  CgroupLimits l;
  l.cpu_cores = j.cpu * processes + kJobOverheadCpu;
  l.memory_bytes = (j.memory_mb * processes + kJobOverheadMemoryMb) << 20;
  l.tasks = tasks_per_process * (processes + kJobOverheadTasks);
  return l;
}

StatusOr<std::string> LocalBackend::Start(const JobLaunch& job) {
  return o_.sandboxed ? StartSandboxed(job) : StartUnconfined(job);
}

StatusOr<std::string> LocalBackend::StartUnconfined(const JobLaunch& job) {
  const JobPaths paths = {job.dir + "/run", job.code_dir, job.store, job.dir + "/" + kControlDir};
  TESSERA_RETURN_IF_ERROR(WriteJobSpec(job, paths));
  const std::vector<std::string> argv = Argv(o_.tessera_bin, paths);
  const std::string log = job.dir + "/" + kSupervisorLog;
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) return Status::Unavailable("cannot write " + log + ": " + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out);
    return Status::Unavailable(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // A session of its own: the job outlives the server, and a stop reaches its process group.
    ::setsid();
    int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    if (::chdir(job.dir.c_str()) != 0) ::_exit(126);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out);
  std::lock_guard<std::mutex> l(mu_);
  children_.insert(pid);
  return std::to_string(pid);
}

namespace {

// The job's directory is the server's; the job gets its own parts of it, as its user, and the
// files the sandbox binds read-only: its control directory (trainers, limits), passwd and group.
Status PrepareSandboxDir(const JobLaunch& j, const CgroupLimits& limits) {
  if (::chmod(j.dir.c_str(), 0700) != 0)
    return Status::Unavailable("cannot chmod " + j.dir + ": " + std::strerror(errno));
  for (const char* sub : {"run", "code", "home", "tmp"})
    TESSERA_RETURN_IF_ERROR(sandbox::GiveToUser(j.dir + "/" + sub, j.uid, j.uid));
  std::error_code ec;
  fs::create_directories(j.dir + "/" + kControlDir, ec);
  if (ec) return Status::Unavailable("cannot create " + j.dir + "/" + kControlDir + ": " + ec.message());
  ::chmod((j.dir + "/" + kControlDir).c_str(), 0755);
  TESSERA_RETURN_IF_ERROR(
      WriteServerFile(j.dir + "/" + kTrainersFile, std::to_string(j.trainers) + "\n", 0644));
  const Json limits_json = {{"pservers", j.job.pservers},
                            {"cpu_per_process", j.cpu},
                            {"memory_mb_per_process", j.memory_mb},
                            {"memory_mb", *limits.memory_bytes >> 20},
                            {"cpu", *limits.cpu_cores},
                            {"tasks", *limits.tasks}};
  TESSERA_RETURN_IF_ERROR(WriteServerFile(j.dir + "/" + kLimitsFile, limits_json.dump(2), 0644));
  TESSERA_RETURN_IF_ERROR(WriteServerFile(
      j.dir + "/passwd", sandbox::PasswdText(j.ns, j.uid, std::string(kJobRoot) + "/home"), 0644));
  TESSERA_RETURN_IF_ERROR(WriteServerFile(j.dir + "/group", sandbox::GroupText(j.ns, j.uid), 0644));
  return Status::OK();
}

}  // namespace

StatusOr<std::string> LocalBackend::StartSandboxed(const JobLaunch& j) {
  if (j.uid == 0) return Status::Internal("job " + j.id + " has no user of its own to run as");
  const std::string datasets = o_.data_dir + "/datasets";
  auto in_sandbox = [&](const std::string& host) -> StatusOr<std::string> {
    if (!Beneath(host, datasets) || host == datasets)
      return Status::Internal(host + " is not a data set store of " + datasets);
    return std::string(kDataRoot) + host.substr(datasets.size());
  };
  TESSERA_ASSIGN_OR_RETURN(const std::string store, in_sandbox(j.store));

  TESSERA_ASSIGN_OR_RETURN(auto cgroup, Cgroup::Create(layout_, CgroupName(j.id), true));
  if (!cgroup->Empty())
    return Status::FailedPrecondition("the control group of job " + j.id + " (" + cgroup->dir() +
                                      ") still holds processes of an earlier start");
  const CgroupLimits limits = LimitsOf(j, j.trainers, o_.tasks_per_process);
  TESSERA_RETURN_IF_ERROR(cgroup->SetLimits(limits));

  TESSERA_RETURN_IF_ERROR(PrepareSandboxDir(j, limits));

  sandbox::SandboxStart start;
  sandbox::SandboxSpec& spec = start.spec;
  spec.uid = j.uid;
  spec.gid = j.uid;
  spec.hostname = "job-" + j.id.substr(0, 8);
  spec.system = sandbox::SystemEntries(RootEntries());
  spec.passwd_file = j.dir + "/passwd";
  spec.group_file = j.dir + "/group";
  const std::string job_root = kJobRoot;
  spec.mounts = {{j.dir + "/run", job_root + "/run", true},
                 {j.dir + "/code", job_root + "/code", true},
                 {j.dir + "/home", job_root + "/home", true},
                 {j.dir + "/" + kControlDir, job_root + "/" + kControlDir, false},
                 {j.dir + "/tmp", "/tmp", true}};
  for (const auto& r : j.readable) {
    TESSERA_ASSIGN_OR_RETURN(std::string target, in_sandbox(r));
    spec.mounts.push_back({r, target, false});
  }
  const std::string install = InstallRoot(o_.tessera_bin);
  if (!install.empty()) spec.mounts.push_back({install, install, false});
  // Its CPU limit where the job's programs look for one (common/cpu_quota.h), read-only.
  if (const std::string cpu = cgroup->DirOf("cpu"); !cpu.empty()) {
    const bool v2 = layout_.For("cpu") && layout_.For("cpu")->v2;
    spec.mounts.push_back({cpu, v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu", false});
  }
  if (Beneath(o_.data_dir, install)) spec.hidden.push_back(o_.data_dir);
  spec.cwd = job_root + "/run";
  const JobPaths paths = {job_root + "/run", job_root + "/code", store, job_root + "/" + kControlDir};
  TESSERA_RETURN_IF_ERROR(WriteJobSpec(j, paths));
  spec.argv = Argv(o_.tessera_bin, paths);
  spec.argv.insert(spec.argv.end(), {"--scale-file", job_root + "/" + kTrainersFile, "--secure-etcd"});

  // Its whole environment: nothing of the server's.
  start.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
               {"HOME", job_root + "/home"},
               {"TMPDIR", "/tmp"},
               {"LANG", "C.UTF-8"},
               {"USER", sandbox::JobUserName(j.ns)},
               {"LOGNAME", sandbox::JobUserName(j.ns)}};
  for (const auto& [k, v] : supervise::PythonPathBeside(o_.tessera_bin)) start.env[k] = Split(v, ':').front();
  start.max_file_bytes = j.max_file_bytes;

  const std::string log = j.dir + "/" + kSupervisorLog;
  start.output_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (start.output_fd < 0) return Status::Unavailable("cannot write " + log + ": " + std::strerror(errno));
  auto pid = sandbox::StartSandboxed(start, *cgroup);
  ::close(start.output_fd);
  if (!pid.ok()) {
    (void)cgroup->Remove();
    return pid.status();
  }
  std::lock_guard<std::mutex> l(mu_);
  children_.insert(*pid);
  return kCgroupHandle + cgroup->name();
}

void LocalBackend::Reap() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = children_.begin(); it != children_.end();) {
    int st;
    it = ::waitpid(*it, &st, WNOHANG) == *it ? children_.erase(it) : std::next(it);
  }
  for (auto it = leftover_groups_.begin(); it != leftover_groups_.end();) {
    auto g = Cgroup::Open(layout_, *it, true);
    it = !g.ok() || (*g)->Remove().ok() ? leftover_groups_.erase(it) : std::next(it);
  }
}

bool LocalBackend::PidAlive(const std::string& dir, int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  // The pid is ours only while its command line names the job's run directory.
  auto cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  return cmdline.ok() && cmdline->find(dir + "/run") != std::string::npos;
}

JobObservation LocalBackend::Observe(const std::string& dir, const std::string& handle) {
  Reap();
  JobObservation o;
  const sandbox::ConfinedDir files(dir);
  if (handle.rfind(kCgroupHandle, 0) == 0) {
    auto cgroup = Cgroup::Open(layout_, handle.substr(std::strlen(kCgroupHandle)), true);
    o.alive = cgroup.ok() && !(*cgroup)->Empty();
    if (cgroup.ok()) {
      const CgroupUsage u = (*cgroup)->Usage();
      const Json limits = ParseJsonOr(files.Read(kLimitsFile, 1 << 16).value_or("{}"), Json::object());
      if (u.oom_kills > 0) {
        o.limit_hit = fmt::format("out of memory (limit {} MiB): the kernel ended {} of its processes",
                                  limits.value("memory_mb", int64_t{0}), u.oom_kills);
      } else if (u.tasks_refused > 0) {
        o.limit_hit = fmt::format(
            "it reached its process limit ({} tasks, processes and threads together): the kernel refused {} "
            "fork(s)",
            limits.value("tasks", int64_t{0}), u.tasks_refused);
      }
      if (!o.alive && !(*cgroup)->Remove().ok()) {
        // A process still leaving one of its hierarchies: tried again at the next observations.
        std::lock_guard<std::mutex> l(mu_);
        leftover_groups_.insert((*cgroup)->name());
      }
    }
  } else {
    o.alive = PidAlive(dir, std::atoi(handle.c_str()));
  }
  o.completed = files.Exists(kResultFile);
  // Its master has taken the lead (the history's first line is written then).
  o.ready = o.alive && files.Size(kHistoryFile) > 0;
  if (!o.alive && !o.completed) o.why_ended = files.TailLines(kSupervisorLog, 6);
  return o;
}

Status LocalBackend::Scale(const std::string& dir, const std::string& handle, int trainers) {
  if (handle.rfind(kCgroupHandle, 0) != 0) {
    local::ScaleRequest request;
    request.trainers = trainers;
    return local::ScaleLocal(dir + "/run", request);
  }
  // Its limits first when it grows, after when it shrinks: never less than it runs.
  auto cgroup = Cgroup::Open(layout_, handle.substr(std::strlen(kCgroupHandle)), true);
  if (!cgroup.ok()) return cgroup.status().WithContext("the job is not running");
  const Json l =
      ParseJsonOr(sandbox::ConfinedDir(dir).Read(kLimitsFile, 1 << 16).value_or("{}"), Json::object());
  JobLaunch shape;
  shape.job.pservers = l.value("pservers", 1);
  shape.cpu = l.value("cpu_per_process", 0.5);
  shape.memory_mb = l.value("memory_mb_per_process", int64_t{512});
  TESSERA_RETURN_IF_ERROR((*cgroup)->SetLimits(LimitsOf(shape, trainers, o_.tasks_per_process)));
  return WriteServerFile(dir + "/" + kTrainersFile, std::to_string(trainers) + "\n", 0644);
}

Status LocalBackend::Stop(const std::string& dir, const std::string& handle, bool force) {
  if (handle.rfind(kCgroupHandle, 0) == 0) {
    auto cgroup = Cgroup::Open(layout_, handle.substr(std::strlen(kCgroupHandle)), true);
    if (!cgroup.ok() || (*cgroup)->Empty()) return Status::OK();
    // The supervisor stops its processes in order on SIGTERM; the group ends everything else.
    if (!force) {
      if (auto leader = sandbox::SandboxLeader(**cgroup); leader && ::kill(*leader, SIGTERM) == 0)
        return Status::OK();
    }
    return (*cgroup)->Kill(std::chrono::seconds(10));
  }
  const int pid = std::atoi(handle.c_str());
  if (!PidAlive(dir, pid)) return Status::OK();
  // The supervisor stops its processes in order on SIGTERM; its children die with it on SIGKILL.
  if (::kill(-pid, force ? SIGKILL : SIGTERM) != 0 && ::kill(pid, force ? SIGKILL : SIGTERM) != 0)
    return Status::Unavailable(std::string("cannot signal the job's supervisor: ") + std::strerror(errno));
  return Status::OK();
}

std::vector<std::pair<std::string, std::string>> LocalBackend::Logs(const std::string& dir) {
  const sandbox::ConfinedDir files(dir);
  std::vector<std::pair<std::string, std::string>> out;
  if (files.Exists(kSupervisorLog)) out.push_back({"supervisor", kSupervisorLog});
  for (const auto& name : files.Files("run/logs", ".log"))
    out.push_back({name.substr(0, name.size() - 4), "run/logs/" + name});
  return out;
}

}  // namespace tessera::server
