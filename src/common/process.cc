// Process (see process.h).
#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>

#include "common/files.h"

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

StatusOr<std::unique_ptr<Process>> Process::Spawn(ProcessOptions options) {
  if (options.argv.empty()) return Status::InvalidArgument("no program to spawn");
  std::unique_ptr<Process> p(new Process(std::move(options)));
  const auto& o = p->options_;
  // Prepare everything the child needs before fork (no allocation after fork).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    std::string name = kv.substr(0, kv.find('='));
    if (o.env.count(name) == 0) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : o.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = o.argv;
  std::vector<char*> argv;
  for (auto& a : argv_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log = o.log_path.empty() ? "/dev/null" : o.log_path;
  pid_t parent = ::getpid();  // the child checks it is still ours after PR_SET_PDEATHSIG

  int fork_errno = 0;
  pid_t pid = Spawner::Get().Run([&]() -> pid_t {
    pid_t pid = ::fork();
    if (pid < 0) fork_errno = errno;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      if (o.new_process_group) ::setpgid(0, 0);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      WriteExecFailure(argv[0], errno);
      ::_exit(127);
    }
    return pid;
  });
  if (pid < 0) return Status::Internal(std::string("fork failed: ") + std::strerror(fork_errno));
  p->pid_ = pid;
  return p;
}

Process::~Process() {
  if (running()) Kill();
}

bool Process::running() {
  if (pid_ <= 0 || exit_code_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return r == 0;
}

Status Process::Signal(int sig) {
  if (!running()) return Status::FailedPrecondition("process " + std::to_string(pid_) + " is not running");
  if (::kill(pid_, sig) != 0) return Status::Internal(std::string("kill: ") + std::strerror(errno));
  return Status::OK();
}

void Process::Kill() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  Wait(std::chrono::seconds(30));
}

std::optional<int> Process::Terminate(std::chrono::milliseconds grace) {
  if (!running()) return exit_code_;
  ::kill(pid_, SIGTERM);
  auto code = Wait(grace);
  if (code) return code;
  Kill();
  return std::nullopt;
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
