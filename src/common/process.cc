// Process (see process.h).
#include "common/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>

#include "common/cgroup.h"
#include "common/files.h"
#include "common/unique_fd.h"

extern char** environ;

namespace tessera {
namespace {

// PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process. So every child is
// forked from this one thread, which lives as long as the test process: children die with the
// process (even on a crash) but not when some short-lived test thread ends.
class Spawner {
 public:
  static Spawner& Get() {
    static Spawner* s = new Spawner();  // never destroyed: its thread must outlive every test
    return *s;
  }
  pid_t Run(const std::function<pid_t()>& fork_fn) {
    std::unique_lock<std::mutex> lock(mu_);
    pid_t result = -2;
    queue_.push([&] { result = fork_fn(); });
    cv_.notify_all();
    done_.wait(lock, [&] { return result != -2; });
    return result;
  }

 private:
  Spawner() {
    std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (true) {
        cv_.wait(lock, [&] { return !queue_.empty(); });
        auto job = std::move(queue_.front());
        queue_.pop();
        job();
        done_.notify_all();
      }
    }).detach();
  }
  std::mutex mu_;
  std::condition_variable cv_, done_;
  std::queue<std::function<void()>> queue_;
};

// In a forked child whose execve failed: one line on its stderr (the log) saying so, with only
// async-signal-safe calls.
void WriteExecFailure(const char* program, int err) {
  char digits[16];
  int n = 0;
  for (unsigned e = static_cast<unsigned>(err); n == 0 || e > 0; e /= 10) digits[n++] = static_cast<char>('0' + e % 10);
  auto put = [](const char* s, size_t len) { (void)!::write(2, s, len); };
  put("cannot execute ", 15);
  put(program, std::strlen(program));
  put(": errno ", 8);
  while (n > 0) put(&digits[--n], 1);
  put("\n", 1);
}

}  // namespace

int RawSigaction(int sig, const RawSignalAction* action, RawSignalAction* old) {
  static_assert(sizeof(RawSignalAction::mask) * 8 >= NSIG - 1, "the kernel's signal set is 64 bits here");
  return static_cast<int>(::syscall(SYS_rt_sigaction, sig, action, old, sizeof(RawSignalAction::mask)));
}

namespace {

// This process's environment with `overrides` added or replacing, as "NAME=value" strings.
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    if (overrides.count(kv.substr(0, kv.find('='))) == 0) out.push_back(std::move(kv));
  }
  for (const auto& [k, v] : overrides) out.push_back(k + "=" + v);
  return out;
}

// The child's stdout and stderr (its log, or /dev/null), opened here rather than in the child:
// a path that cannot be opened is the caller's error, named.
StatusOr<UniqueFd> OpenChildLog(const ProcessOptions& o) {
  const std::string log = o.log_path.empty() ? "/dev/null" : o.log_path;
  UniqueFd fd(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd.valid())
    return Status::Unavailable("cannot open " + log + " for the output of " + o.argv[0] + ": " + std::strerror(errno));
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<Process>> Process::Spawn(ProcessOptions options) {
  if (options.argv.empty()) return Status::InvalidArgument("no program to spawn");
  std::unique_ptr<Process> p(new Process(std::move(options)));
  const auto& o = p->options_;
  // Prepare everything the child needs before fork (no allocation after fork).
  std::vector<std::string> env_strings = ChildEnvironment(o.env);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = o.argv;
  std::vector<char*> argv;
  for (auto& a : argv_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  UniqueFd log_fd;
  if (!o.inherit_output) {
    TESSERA_ASSIGN_OR_RETURN(log_fd, OpenChildLog(o));
  }
  pid_t parent = ::getpid();  // the child checks it is still ours after PR_SET_PDEATHSIG
  // A control group of its own, joined by the child before it runs anything.
  if (o.cgroup_parent) {
    static std::atomic<uint64_t> next{0};
    TESSERA_ASSIGN_OR_RETURN(p->cgroup_, o.cgroup_parent->Child("p" + std::to_string(next.fetch_add(1))));
  }
  std::vector<std::string> join_files = p->cgroup_ ? p->cgroup_->ProcsFiles() : std::vector<std::string>{};
  int stdin_pipe[2] = {-1, -1};
  if (o.stdin_pipe && ::pipe2(stdin_pipe, O_CLOEXEC) != 0) {
    return Status::Unavailable(std::string("cannot make a pipe for a child's stdin: ") + std::strerror(errno));
  }

  int fork_errno = 0;
  pid_t pid = Spawner::Get().Run([&]() -> pid_t {
    pid_t pid = ::fork();
    if (pid < 0) fork_errno = errno;
    if (pid == 0) {
      // A child starts with no signal blocked or ignored, whatever its parent does (a parent
      // that waits for signals with sigwait blocks them in every thread, and the mask and
      // ignored signals survive exec: a child would never see SIGTERM).
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      // Every number, through the kernel's own call: glibc's sigaction() refuses the two signals
      // it reserves (32, 33), and GNU make, for one, leaves them ignored in what it runs.
      const RawSignalAction dfl{};  // SIG_DFL
      for (int sig = 1; sig < NSIG; ++sig) {
        if (sig != SIGKILL && sig != SIGSTOP) RawSigaction(sig, &dfl, nullptr);
      }
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      if (o.new_process_group) ::setpgid(0, 0);
      for (const auto& f : join_files) {
        int cg = ::open(f.c_str(), O_WRONLY | O_CLOEXEC);
        if (cg < 0 || ::write(cg, "0", 1) != 1) {
          WriteExecFailure(f.c_str(), errno);  // "cannot execute <cgroup.procs>: errno N"
          ::_exit(125);
        }
        ::close(cg);
      }
      if (log_fd.valid()) {  // dup2's copies are not closed on exec
        ::dup2(log_fd.get(), 1);
        ::dup2(log_fd.get(), 2);
      }
      int in = o.stdin_pipe ? stdin_pipe[0] : ::open("/dev/null", O_RDONLY);
      if (in >= 0) ::dup2(in, 0);
      if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      WriteExecFailure(argv[0], errno);
      ::_exit(127);
    }
    return pid;
  });
  if (stdin_pipe[0] >= 0) ::close(stdin_pipe[0]);
  if (pid < 0) {
    if (stdin_pipe[1] >= 0) ::close(stdin_pipe[1]);
    if (p->cgroup_) (void)p->cgroup_->Remove();
    return Status::Internal(std::string("fork failed: ") + std::strerror(fork_errno));
  }
  p->pid_ = pid;
  p->stdin_fd_ = stdin_pipe[1];
  return p;
}

StatusOr<std::string> FindProgram(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("no program named");
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return Status::NotFound("no program " + name + " (not there, or not executable)");
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return Status::NotFound("no program '" + name + "' on PATH");
}

Process::Process(ProcessOptions options) : options_(std::move(options)) {}

Process::~Process() {
  if (running()) Kill();
  EndCgroup();
  CloseStdin();
}

void Process::EndCgroup() {
  if (!cgroup_) return;
  (void)cgroup_->Kill(std::chrono::seconds(5));
  if (cgroup_->Remove().ok()) cgroup_.reset();
}

void Process::CloseStdin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

namespace {

// Whether a live process other than `leader` belongs to process group `pgid` (read from /proc:
// the leader's zombie keeps the group alive for kill(), so kill(-pgid, 0) cannot tell).
bool GroupHasOthers(pid_t pgid, pid_t leader) {
  DIR* d = ::opendir("/proc");
  if (!d) return false;
  bool found = false;
  char path[64], buf[512];
  for (dirent* e; !found && (e = ::readdir(d)) != nullptr;) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == leader) continue;
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so parse after the
    // last ')'.
    const char* p = std::strrchr(buf, ')');
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (!p || std::sscanf(p + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) continue;
    found = pgrp == pgid && state != 'Z' && state != 'X';
  }
  ::closedir(d);
  return found;
}

}  // namespace

bool Process::SignalGroup(int sig) {
  if (pid_ <= 0) return false;
  const int in_cgroup = cgroup_ ? cgroup_->Signal(sig) : 0;
  if (options_.new_process_group && ::kill(-pid_, sig) == 0) return true;
  return ::kill(pid_, sig) == 0 || in_cgroup > 0;
}

bool Process::OthersLeft() const {
  if (options_.new_process_group && GroupHasOthers(pid_, pid_)) return true;
  if (!cgroup_) return false;
  for (pid_t p : cgroup_->Pids())
    if (p != pid_) return true;
  return false;
}

bool Process::running() {
  if (pid_ <= 0 || exit_code_) return false;
  const auto now = std::chrono::steady_clock::now();
  const bool grace_over = stop_deadline_ && now >= *stop_deadline_;
  if (grace_over && !escalated_) {
    escalated_ = true;
    SignalGroup(SIGKILL);
  }
  // Has the leader exited? Look without reaping it: while its zombie stays, its pid (the group's
  // id) cannot be given to another process, so signalling the group is safe.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
  if (info.si_pid == 0) return true;  // still running
  // Asked to stop: what the child started may finish its own shutdown within the grace period.
  if (stop_deadline_ && !grace_over && OthersLeft()) return true;
  if (options_.new_process_group) ::kill(-pid_, SIGKILL);  // whatever it left behind
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return r == 0;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  EndCgroup();  // whatever it left behind outside its process group
  return false;
}

Status Process::Signal(int sig) {
  if (!running()) return Status::FailedPrecondition("process " + std::to_string(pid_) + " is not running");
  if (!SignalGroup(sig)) return Status::Internal(std::string("kill: ") + std::strerror(errno));
  return Status::OK();
}

void Process::KillNoWait() {
  if (!running()) return;
  SignalGroup(SIGKILL);
}

void Process::Kill() {
  if (!running()) return;
  SignalGroup(SIGKILL);
  Wait(std::chrono::seconds(30));
}

void Process::Stop(std::chrono::milliseconds grace) {
  if (!running() || stop_deadline_) return;
  stop_deadline_ = std::chrono::steady_clock::now() + grace;
  SignalGroup(SIGTERM);
}

std::optional<int> Process::Terminate(std::chrono::milliseconds grace) {
  if (!running()) return exit_code_;
  Stop(grace);
  // The grace period, then up to 30 s for the SIGKILL to take effect.
  Wait(grace + std::chrono::seconds(30));
  if (escalated_) return std::nullopt;
  return exit_code_;
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_code_;
}

std::string Process::Output() const {
  if (options_.log_path.empty()) return "";
  auto s = ReadFile(options_.log_path);
  return s.ok() ? *s : "";
}

bool Process::WaitForOutput(const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Output().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Output().find(text) != std::string::npos;
}

}  // namespace tessera
