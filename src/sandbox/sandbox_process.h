// Starting and finding a sandboxed job's processes (the I/O around bwrap_command.h).
//
// StartSandboxed forks a child that joins the job's control group before anything else runs (so
// everything the job ever starts is in it: its limits hold, and it is how the job is found and
// ended), leaves the server's session, takes the job's limits on files (no core dumps; no file
// larger than the job may write), and executes bwrap with exactly the environment given (an
// allowlist: nothing of the server's). The child is not tied to the server (no death signal), so
// a job outlives a server that restarts; the server finds it again by its control group.
// Thread-safe (no shared state); the caller reaps the child it started (waitpid).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/cgroup.h"
#include "sandbox/bwrap_command.h"
#include "tessera/status.h"

namespace tessera::sandbox {

// Whether this host can run sandboxes: root (the job's user is another user), bwrap and setpriv
// present. FailedPrecondition naming what is missing and what to do.
Status CheckSandboxHost();

struct SandboxStart {
  SandboxSpec spec;
  std::map<std::string, std::string> env;  // the whole environment of the job's first process
  int output_fd = -1;                      // its stdout and stderr (the server's log of the job)
  std::optional<int64_t> max_file_bytes;   // RLIMIT_FSIZE: no file of the job grows past it
};

// Starts it in `cgroup`; returns the pid of bwrap (in this process's PID namespace).
StatusOr<pid_t> StartSandboxed(const SandboxStart& start, const Cgroup& cgroup);

// The job's first process (the one bwrap's init started: PID 2 of the job's PID namespace), found
// among the group's processes by /proc/PID/status's NSpid; nullopt when it is not (or no longer)
// there.
std::optional<pid_t> SandboxLeader(const Cgroup& cgroup);

// Makes `path` (created if missing, with its files) belong to uid:gid, the directory itself mode
// 0700. Links are changed themselves (lchown), never followed.
Status GiveToUser(const std::string& path, uid_t uid, gid_t gid);

}  // namespace tessera::sandbox
