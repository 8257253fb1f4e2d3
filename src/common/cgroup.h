// Cgroup: a control group this process made. The kernel keeps every process started in it there,
// whatever the process does (a daemon that called setsid() and left its process group stays in),
// so a group is how a job's processes are found and ended; it also carries limits on CPU,
// memory and tasks, and counts what the kernel did at them (OOM kills, forks refused).
//
// Hosts differ: cgroup v2 alone (one unified hierarchy), v1 alone (one hierarchy per controller),
// or both (v1 controllers beside a v2 mount, as systemd's "hybrid" set-up and this project's CI
// machines have). A Cgroup is one directory in each hierarchy it needs:
//   - membership (who is in, signal them all, end them all) from v2 where it is mounted — it has
//     cgroup.kill and needs no controller — else from v1's pids (or freezer) hierarchy;
//   - each controller its limits need (cpu, memory, pids) from v2 where v2 has it, else from the
//     controller's v1 hierarchy.
// Groups are made below this process's own group in each hierarchy (the part of the tree the host
// delegated to it), never elsewhere. The layout is pure data read once (CgroupLayout::Detect);
// ParseCgroupLayout and CgroupLimitWrites are pure and unit-tested for every kind of host.
//
// Thread-safety: a Cgroup is a handle on directories; its methods may be called from any thread,
// and the kernel serializes what they do. It is not removed on destruction (a job's group outlives
// a server that restarts): Remove() does that.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/cpu_quota.h"
#include "tessera/status.h"

namespace tessera {

// One mounted hierarchy and this process's place in it.
struct CgroupHierarchy {
  std::string mount;                  // where it is mounted: "/sys/fs/cgroup/memory"
  std::string own;                    // this process's group, below the mount: "" or "/a/b"
  bool v2 = false;                    // the unified hierarchy
  std::set<std::string> controllers;  // v1: the mount's; v2: those this process's group can hand on
  std::string Dir() const { return mount + own; }
};

struct CgroupLayout {
  std::vector<CgroupHierarchy> hierarchies;
  // The hierarchy that tracks membership (v2, else v1 pids, else v1 freezer), or nullptr.
  const CgroupHierarchy* Tracking() const;
  // The hierarchy that holds `controller` ("cpu", "memory", "pids"): v2 where it has it, else
  // v1; nullptr when none does.
  const CgroupHierarchy* For(std::string_view controller) const;
  // One line for people: which hierarchy serves what ("membership: v2 /sys/fs/cgroup/unified;
  // memory: v1 ...").
  std::string Describe() const;

  // This machine's, read from /proc/self/mountinfo and /proc/self/cgroup. On cgroup v2 it also
  // hands the controllers on to the groups it makes (cgroup.subtree_control), where the kernel
  // lets it.
  static CgroupLayout Detect();
};

// The layout from /proc/self/mountinfo's and /proc/self/cgroup's texts; `read` gives v2's
// cgroup.controllers and cgroup.subtree_control of this process's group (a v2 controller
// counts only once it is in both: available to the group and handed on to its children).
CgroupLayout ParseCgroupLayout(std::string_view mountinfo, std::string_view proc_cgroup,
                               const ReadTextFile& read);

// Limits a group can carry; nullopt: none.
struct CgroupLimits {
  std::optional<double> cpu_cores;      // CPU time: cores' worth per period (1.5: one and a half)
  std::optional<int64_t> memory_bytes;  // memory (and swap: none beyond it)
  std::optional<int64_t> tasks;         // processes and threads together
};

// One file to write in a controller's directory of the group.
struct CgroupWrite {
  std::string controller;  // "cpu", "memory", "pids"
  std::string file;        // "memory.max", "cpu.cfs_quota_us", ...
  std::string value;
  bool optional = false;  // a file some kernels lack (swap accounting): its absence is no error
};
// What setting `limits` writes, in order, given whether each controller is v2's (pure).
std::vector<CgroupWrite> CgroupLimitWrites(const CgroupLimits& limits, bool cpu_v2, bool memory_v2,
                                           bool pids_v2);

// What the kernel counted in a group.
struct CgroupUsage {
  int64_t memory_bytes = 0;   // now
  int64_t tasks = 0;          // now
  int64_t oom_kills = 0;      // processes the OOM killer ended at the memory limit, ever
  int64_t tasks_refused = 0;  // forks refused at the task limit, ever
};
// "oom_kill N" from v2's memory.events or v1's memory.oom_control; "max N" from pids.events (pure).
int64_t CgroupCounter(std::string_view text, std::string_view key);

// The pid in a group named "<prefix><pid>" (a supervisor's), or nullopt for any other name (pure).
std::optional<pid_t> GroupOwnerPid(std::string_view name, std::string_view prefix);

// Removes the groups "<prefix><pid>" below this process's own group whose process `pid` no longer
// exists and that hold no process: what a supervisor ended by SIGKILL (or a power cut of its
// machine's session) left behind. A group whose owner lives, or that still holds a process, stays.
// Returns how many it removed.
int RemoveLeftoverGroups(const CgroupLayout& layout, std::string_view prefix);

class Cgroup;
// A supervisor's group, "<prefix><its pid>" below its own, made once the leftovers of gone
// supervisors of the same prefix are removed. As Cgroup::Create (without limits) fails.
StatusOr<std::unique_ptr<Cgroup>> CreateSupervisorGroup(std::string_view prefix);

class Cgroup {
 public:
  // Makes group `name` (one path component) below this process's own group: in the tracking
  // hierarchy, and with `with_limits`, in each hierarchy of cpu, memory and pids too.
  // FailedPrecondition, saying why, when there is no tracking hierarchy or its directory cannot be
  // made (not root, not delegated); with `with_limits`, also when a controller is missing.
  // An existing group of that name is reused (a restarted server's job, or a leftover).
  static StatusOr<std::unique_ptr<Cgroup>> Create(const CgroupLayout& layout, const std::string& name,
                                                  bool with_limits);
  // The group `name` made earlier, when its membership directory is there (NotFound otherwise),
  // with those of its limits' directories that are still there.
  static StatusOr<std::unique_ptr<Cgroup>> Open(const CgroupLayout& layout, const std::string& name,
                                                bool with_limits);
  // A group of its own below this one (a supervised child's): made in the tracking hierarchy; in
  // the hierarchies of this group's limits, a process that joins it joins this group (v1: the
  // limits are this group's), so the child is held to them too. Remove() removes only what it
  // made.
  StatusOr<std::unique_ptr<Cgroup>> Child(const std::string& name) const;

  Status SetLimits(const CgroupLimits& limits);
  // The cgroup.procs files a process joins by writing its pid into (or "0" for itself: the
  // child of a fork does that before exec, with only async-signal-safe calls).
  const std::vector<std::string>& ProcsFiles() const { return procs_files_; }
  Status Join(pid_t pid) const;
  // Every process in the group and its subgroups.
  std::vector<pid_t> Pids() const;
  bool Empty() const { return Pids().empty(); }
  // Sends `sig` to every process in it; returns how many were signalled.
  int Signal(int sig) const;
  // Ends every process in it (cgroup.kill where the kernel has it, else SIGKILL until none is
  // left) and waits until it is empty. DeadlineExceeded, naming what is left, after `timeout`
  // (a process stuck in the kernel dies when it wakes).
  Status Kill(std::chrono::milliseconds timeout) const;
  CgroupUsage Usage() const;
  // Removes its directories (subgroups first). Unavailable while a process is in it.
  Status Remove() const;

  const std::string& name() const { return name_; }
  // The group's directory in the tracking hierarchy.
  const std::string& dir() const { return dirs_.front().path; }
  // Its directory in `controller`'s hierarchy, or "" without it.
  std::string DirOf(std::string_view controller) const;

 private:
  struct Dir {
    std::string path;
    bool v2 = false;
    std::set<std::string> controllers;  // what this directory serves ("" for membership)
    bool owned = true;                  // made for this group (removed with it)
  };
  Cgroup(std::string name, std::vector<Dir> dirs);
  // Its directory in each hierarchy it needs (the tracking one first), made or not.
  static StatusOr<std::vector<Dir>> Planned(const CgroupLayout& layout, const std::string& name,
                                            bool with_limits);
  std::string name_;
  std::vector<Dir> dirs_;  // dirs_[0]: the tracking hierarchy's
  std::vector<std::string> procs_files_;
};

}  // namespace tessera
