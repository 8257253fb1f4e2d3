// Jobs as `tessera local` processes on the server's machine (see local_backend.h).
#include "server/local_backend.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/files.h"
#include "common/strings.h"
#include "local/supervisor.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;

// The last "web console: URL" the supervisor printed.
std::string ConsoleFromLog(const std::string& log) {
  auto text = ReadFile(log);
  if (!text.ok()) return "";
  const std::string mark = "web console: ";
  size_t at = text->rfind(mark);
  if (at == std::string::npos) return "";
  size_t end = text->find_first_of(" \r\n", at + mark.size());
  std::string url =
      text->substr(at + mark.size(), end == std::string::npos ? std::string::npos : end - at - mark.size());
  while (!url.empty() && url.back() == '/') url.pop_back();  // httplib::Client takes scheme://host:port
  return url;
}

}  // namespace

std::vector<std::string> LocalBackend::Argv(const std::string& bin, const JobLaunch& j) {
  std::vector<std::string> a = {bin,
                                "local",
                                "--run",
                                j.dir + "/run",
                                "--job",
                                j.id,
                                "--store",
                                j.store,
                                "--dataset",
                                j.dataset,
                                "--pservers",
                                std::to_string(j.pservers),
                                "--trainers",
                                std::to_string(j.trainers),
                                "--mode",
                                j.mode,
                                "--optimizer",
                                j.optimizer,
                                "--passes",
                                std::to_string(j.passes),
                                "--batch-size",
                                std::to_string(j.batch_size)};
  if (!j.eval_dataset.empty()) a.insert(a.end(), {"--eval-dataset", j.eval_dataset});
  // The server runs several jobs at once here, each of which would take the cores for its own
  // when deciding on busy polling: so none polls.
  a.insert(a.end(), {"--busy-poll-us", "0"});
  if (!j.model.empty()) {
    a.insert(a.end(), {"--model", j.model});
  } else {
    a.insert(a.end(), {"--trainer-cmd", "cd " + ShellQuote(j.code_dir) + " && " + j.command});
  }
  for (const auto& m : j.model_args) a.insert(a.end(), {"--model-arg", m});
  return a;
}

StatusOr<std::string> LocalBackend::Start(const JobLaunch& job) {
  const std::vector<std::string> argv = Argv(bin_, job);
  const std::string log = job.dir + "/supervisor.log";
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
  {
    std::lock_guard<std::mutex> l(mu_);
    children_.insert(pid);
  }
  return std::to_string(pid);
}

bool LocalBackend::Alive(const std::string& dir, int pid) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (children_.count(pid)) {
      int st;
      if (::waitpid(pid, &st, WNOHANG) == pid) children_.erase(pid);
    }
  }
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  // The pid is ours only while its command line names the job's run directory.
  auto cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  return cmdline.ok() && cmdline->find(dir + "/run") != std::string::npos;
}

JobObservation LocalBackend::Observe(const std::string& dir, const std::string& handle) {
  JobObservation o;
  o.alive = Alive(dir, std::atoi(handle.c_str()));
  o.completed = fs::exists(dir + "/run/result.json");
  o.console = ConsoleFromLog(dir + "/supervisor.log");
  if (o.alive && !o.console.empty()) {
    httplib::Client c(o.console);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(2, 0);
    auto r = c.Get("/api/job");
    o.ready = r && r->status == 200;
  }
  if (!o.alive && !o.completed) o.why_ended = TailLines(dir + "/supervisor.log", 6);
  return o;
}

Status LocalBackend::Scale(const std::string& dir, const std::string&, int trainers) {
  local::ScaleRequest request;
  request.trainers = trainers;
  return local::ScaleLocal(dir + "/run", request);
}

Status LocalBackend::Stop(const std::string& dir, const std::string& handle, bool force) {
  const int pid = std::atoi(handle.c_str());
  if (!Alive(dir, pid)) return Status::OK();
  // The supervisor stops its processes in order on SIGTERM; its children die with it on SIGKILL.
  if (::kill(-pid, force ? SIGKILL : SIGTERM) != 0 && ::kill(pid, force ? SIGKILL : SIGTERM) != 0)
    return Status::Unavailable(std::string("cannot signal the job's supervisor: ") + std::strerror(errno));
  return Status::OK();
}

std::vector<std::pair<std::string, std::string>> LocalBackend::Logs(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  if (fs::exists(dir + "/supervisor.log")) out.push_back({"supervisor", dir + "/supervisor.log"});
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir + "/run/logs", ec))
    if (e.path().extension() == ".log") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) out.push_back({n, dir + "/run/logs/" + n + ".log"});
  return out;
}

}  // namespace tessera::server
