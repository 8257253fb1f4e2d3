// Starting and finding sandboxed jobs (see sandbox_process.h).
#include "sandbox/sandbox_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/process.h"
#include "common/strings.h"

namespace tessera::sandbox {

namespace fs = std::filesystem;

Status CheckSandboxHost() {
  if (::geteuid() != 0)
    return Status::FailedPrecondition(
        "sandboxed jobs need the server to run as root (each job runs as a user of its own, in "
        "namespaces and a control group the server makes); run it as root, or with --sandbox off "
        "to run jobs as the server's own user, unconfined (only for a server you alone use)");
  for (const char* program : {"/usr/bin/bwrap", "/usr/bin/setpriv"}) {
    if (::access(program, X_OK) != 0)
      return Status::FailedPrecondition(
          std::string(program) + " is missing: sandboxed jobs need it (apt-get install " +
          (std::string(program) == "/usr/bin/bwrap" ? "bubblewrap" : "util-linux") +
          "), or run the server with --sandbox off");
  }
  return Status::OK();
}

StatusOr<pid_t> StartSandboxed(const SandboxStart& start, const Cgroup& cgroup) {
  // Everything the child needs is made before fork: after it, only async-signal-safe calls.
  // bwrap reads its options from a file (--args): its command line, which every process may read
  // in /proc (the job's own, as its PID 1), then shows none of the host's paths, only the
  // command it runs (whose paths are the sandbox's).
  const std::vector<std::string> all = BwrapArgv(start.spec);
  const auto dashes = std::find(all.begin(), all.end(), "--");
  std::string args;
  for (auto it = all.begin() + 1; it != dashes; ++it) args += *it + std::string(1, '\0');
  int args_fd = ::memfd_create("bwrap-args", MFD_CLOEXEC);
  if (args_fd < 0) return Status::Unavailable(std::string("memfd_create: ") + std::strerror(errno));
  if (::write(args_fd, args.data(), args.size()) != static_cast<ssize_t>(args.size()) ||
      ::lseek(args_fd, 0, SEEK_SET) != 0) {
    ::close(args_fd);
    return Status::Unavailable(std::string("cannot write bwrap's arguments: ") + std::strerror(errno));
  }
  std::vector<std::string> argv_s = {all.front(), "--args", "3"};
  argv_s.insert(argv_s.end(), dashes, all.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (const auto& [k, v] : start.env) env_s.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> join = cgroup.ProcsFiles();
  const rlim_t fsize = start.max_file_bytes ? static_cast<rlim_t>(*start.max_file_bytes) : RLIM_INFINITY;

  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(args_fd);
    return Status::Unavailable(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    auto die = [](const char* what) {
      const char* e = std::strerror(errno);
      (void)!::write(2, what, std::strlen(what));
      (void)!::write(2, ": ", 2);
      (void)!::write(2, e, std::strlen(e));
      (void)!::write(2, "\n", 1);
      ::_exit(125);
    };
    if (start.output_fd >= 0) {
      ::dup2(start.output_fd, 1);
      ::dup2(start.output_fd, 2);
    }
    for (const auto& f : join) {
      int fd = ::open(f.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) die("cannot join the job's control group");
      ::close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const RawSignalAction dfl{};
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) RawSigaction(sig, &dfl, nullptr);
    ::setsid();
    int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in >= 0) ::dup2(in, 0);
    const rlimit no_core{0, 0}, files{fsize, fsize};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::setrlimit(RLIMIT_FSIZE, &files);
    // Only 0, 1, 2 and its arguments (3) reach bwrap: the server's sockets and files stay the
    // server's.
    if (args_fd == 3 ? ::fcntl(3, F_SETFD, 0) != 0 : ::dup2(args_fd, 3) != 3)
      die("cannot pass bwrap its arguments");
    ::close_range(4, ~0U, 0);
    if (::chdir("/") != 0) die("chdir /");
    ::execve(argv[0], argv.data(), envp.data());
    die("cannot execute /usr/bin/bwrap");
  }
  ::close(args_fd);
  return pid;
}

std::optional<pid_t> SandboxLeader(const Cgroup& cgroup) {
  for (pid_t pid : cgroup.Pids()) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      std::vector<std::string> ids = Split(line.substr(6), '\t');
      std::vector<std::string> nonempty;
      for (auto& i : ids)
        if (!Trim(i).empty()) nonempty.emplace_back(Trim(i));
      // NSpid lists its pid in every namespace from ours down: [ours, the job's, ...].
      if (nonempty.size() >= 2 && nonempty[1] == "2") return pid;
      break;
    }
  }
  return std::nullopt;
}

Status GiveToUser(const std::string& path, uid_t uid, gid_t gid) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Status::Unavailable("cannot create " + path + ": " + ec.message());
  auto give = [&](const std::string& p) -> Status {
    if (::lchown(p.c_str(), uid, gid) != 0)
      return Status::Unavailable("cannot give " + p + " to user " + std::to_string(uid) + ": " +
                                 std::strerror(errno));
    return Status::OK();
  };
  TESSERA_RETURN_IF_ERROR(give(path));
  if (::chmod(path.c_str(), 0700) != 0)
    return Status::Unavailable("cannot chmod " + path + ": " + std::strerror(errno));
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    TESSERA_RETURN_IF_ERROR(give(it->path().string()));
  }
  if (ec) return Status::Unavailable("cannot walk " + path + ": " + ec.message());
  return Status::OK();
}

}  // namespace tessera::sandbox
