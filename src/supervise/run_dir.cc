// Run directory rules (see run_dir.h).
#include "supervise/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/strings.h"
#include "coord/keys.h"
#include "job/job_store.h"

namespace tessera::supervise {

namespace fs = std::filesystem;

StatusOr<RunDirLock> RunDirLock::Acquire(const std::string& run_dir) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) return Status::Unavailable("cannot create run directory '" + run_dir + "': " + ec.message());
  const std::string path = run_dir + "/.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Unavailable("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[32] = {0};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return Status::Unavailable("cannot lock " + path + ": " + std::strerror(err));
    const std::string raw(buf, n > 0 ? static_cast<size_t>(n) : 0);
    std::string pid(Trim(raw));
    if (pid.empty()) pid = "?";
    return Status::AlreadyExists("run directory '" + run_dir + "': tessera local is already running (pid " +
                                 pid + ") there; wait for it, stop it (Ctrl-C, or kill " + pid +
                                 "), or choose another --run");
  }
  std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    ::close(fd);
    return Status::Unavailable("cannot write " + path + ": " + std::strerror(errno));
  }
  return RunDirLock(fd);
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

Status CheckNewRun(const std::string& run_dir) {
  if (!fs::exists(run_dir + "/run.json")) return Status::OK();
  return Status::AlreadyExists(
      "run directory '" + run_dir +
      "' was used by an earlier run; choose a new one, or continue it with --resume");
}

Status CheckResumable(const std::string& run_dir, const std::string& job, const std::string& dataset,
                      bool own_etcd) {
  auto text = ReadFile(run_dir + "/run.json");
  if (!text.ok()) {
    return Status::NotFound("--resume: '" + run_dir + "' holds no earlier run to continue (no run.json); " +
                            "start one there without --resume");
  }
  auto prev = nlohmann::json::parse(*text, nullptr, false);
  if (prev.is_discarded() || !prev.is_object()) {
    return Status::DataLoss("--resume: " + run_dir + "/run.json is not readable JSON");
  }
  if (prev.value("job", "") != job || prev.value("dataset", "") != dataset) {
    return Status::InvalidArgument("--resume: " + run_dir + "/run.json is for job '" +
                                   prev.value("job", "?") + "' on data set '" + prev.value("dataset", "?") +
                                   "'; give the same --job and --dataset");
  }
  if (fs::exists(run_dir + "/result.json")) {
    return Status::FailedPrecondition(
        "--resume: the run in '" + run_dir +
        "' finished already (see its result.json and model); there is nothing to "
        "continue, and nothing was changed. Start a new run with another --run");
  }
  if (own_etcd && !fs::exists(run_dir + "/etcd")) {
    return Status::NotFound("--resume: " + run_dir + "/etcd holds no etcd data to continue from");
  }
  return Status::OK();
}

Status CheckResumeCheckpoints(etcd::EtcdClient* etcd, const std::string& job, const std::string& run_dir) {
  auto config = LoadJobConfig(etcd, job);
  if (!config.ok()) return config.status().WithContext("--resume");
  std::vector<std::string> missing;
  for (int i = 0; i < config->pservers; ++i) {
    TESSERA_ASSIGN_OR_RETURN(auto rec, etcd->Get(keys::Checkpoint(job, i)));
    if (rec.kvs.empty()) missing.push_back(std::to_string(i));
  }
  if (missing.empty()) return Status::OK();
  return Status::FailedPrecondition(
      "--resume: the run in '" + run_dir + "' has no checkpoint of pserver " + Join(missing, ", ") +
      " (it ran without --checkpoint-every or --checkpoint-steps, or stopped before the first one), so its "
      "parameters are lost; resuming would continue the data where it stopped with untrained parameters. "
      "Nothing was changed; start a new run instead");
}

}  // namespace tessera::supervise
