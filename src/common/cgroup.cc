// Cgroup (see cgroup.h).
#include "common/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/strings.h"

namespace tessera {
namespace {

constexpr const char* kLimitControllers[] = {"cpu", "memory", "pids"};

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 2])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 3]))) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The non-empty pieces of `s`, each without surrounding white space.
std::vector<std::string> Words(std::string_view s, char sep) {
  std::vector<std::string> out;
  for (const auto& w : Split(s, sep)) {
    std::string t(Trim(w));
    if (!t.empty()) out.push_back(std::move(t));
  }
  return out;
}

// The group below a mount whose root is `root`: "" for the mount's root itself; nullopt when the
// group lies outside what is mounted there.
std::optional<std::string> Below(const std::string& root, const std::string& group) {
  const std::string g = group == "/" ? "" : group;
  const std::string r = root == "/" ? "" : root;
  if (g.compare(0, r.size(), r) != 0 || (g.size() > r.size() && g[r.size()] != '/')) return std::nullopt;
  return g.substr(r.size());
}

std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Writes `value` to a control file; errno's text on failure.
Status WriteControl(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::Unavailable("cannot open " + path + ": " + std::strerror(errno));
  ssize_t n = ::write(fd, value.data(), value.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size()))
    return Status::Unavailable("cannot write '" + value + "' to " + path + ": " + std::strerror(err));
  return Status::OK();
}

// The group directories below `dir`, deepest first (at most 8 levels, 4,096 directories).
void SubgroupsDeepestFirst(const std::string& dir, int depth, std::vector<std::string>* out) {
  if (depth > 8 || out->size() > 4096) return;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> subs;
  for (dirent* e; (e = ::readdir(d)) != nullptr;) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    subs.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  for (const auto& s : subs) {
    SubgroupsDeepestFirst(s, depth + 1, out);
    out->push_back(s);
  }
}

void ReadPids(const std::string& dir, std::vector<pid_t>* out) {
  auto text = ReadText(dir + "/cgroup.procs");
  if (!text) return;
  for (const auto& w : Words(*text, '\n')) {
    const long pid = std::strtol(w.c_str(), nullptr, 10);
    if (pid > 0) out->push_back(static_cast<pid_t>(pid));
  }
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::OK();
  const int err = errno;
  return Status::FailedPrecondition("cannot make the control group " + path + ": " + std::strerror(err) +
                                    (err == EACCES || err == EROFS || err == EPERM
                                         ? " (control groups need root, or a group delegated to this user)"
                                         : ""));
}

}  // namespace

CgroupLayout ParseCgroupLayout(std::string_view mountinfo, std::string_view proc_cgroup,
                               const ReadTextFile& read) {
  // This process's group in each hierarchy: v2's under "", v1's under its controllers.
  std::optional<std::string> v2_group;
  std::vector<std::pair<std::set<std::string>, std::string>> v1_groups;
  for (const auto& line : Words(proc_cgroup, '\n')) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1), group = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && ctrls.empty()) {
      v2_group = group;
      continue;
    }
    std::set<std::string> set;
    for (const auto& c : Words(ctrls, ','))
      if (c.rfind("name=", 0) != 0) set.insert(c);
    if (!set.empty()) v1_groups.push_back({set, group});
  }
  CgroupLayout layout;
  for (const auto& line : Words(mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const auto before = Words(line.substr(0, dash), ' ');
    const auto after = Words(line.substr(dash + 3), ' ');
    if (before.size() < 5 || after.size() < 3) continue;
    const std::string root = Unescape(before[3]), mount = Unescape(before[4]);
    const std::string& fstype = after[0];
    CgroupHierarchy h;
    h.mount = mount;
    if (fstype == "cgroup2") {
      if (!v2_group) continue;
      auto own = Below(root, *v2_group);
      if (!own || std::any_of(layout.hierarchies.begin(), layout.hierarchies.end(),
                              [](const CgroupHierarchy& x) { return x.v2; }))
        continue;
      h.v2 = true;
      h.own = *own;
      const auto available = Words(read(h.Dir() + "/cgroup.controllers").value_or(""), ' ');
      const auto handed = Words(read(h.Dir() + "/cgroup.subtree_control").value_or(""), ' ');
      for (const auto& c : available)
        if (std::find(handed.begin(), handed.end(), c) != handed.end()) h.controllers.insert(c);
    } else if (fstype == "cgroup") {
      std::set<std::string> opts;
      for (const auto& o : Words(after[2], ',')) opts.insert(o);
      for (const auto& [set, group] : v1_groups) {
        if (!std::all_of(set.begin(), set.end(), [&](const std::string& c) { return opts.count(c) > 0; }))
          continue;
        auto own = Below(root, group);
        if (!own) break;
        if (std::any_of(layout.hierarchies.begin(), layout.hierarchies.end(),
                        [&](const CgroupHierarchy& x) { return !x.v2 && x.controllers == set; }))
          break;
        h.own = *own;
        h.controllers = set;
        layout.hierarchies.push_back(h);
        break;
      }
      continue;
    } else {
      continue;
    }
    layout.hierarchies.push_back(h);
  }
  return layout;
}

const CgroupHierarchy* CgroupLayout::Tracking() const {
  for (const auto& h : hierarchies)
    if (h.v2) return &h;
  for (const char* c : {"pids", "freezer", "memory", "cpu"})
    for (const auto& h : hierarchies)
      if (h.controllers.count(c)) return &h;
  return nullptr;
}

const CgroupHierarchy* CgroupLayout::For(std::string_view controller) const {
  const std::string c(controller);
  for (const auto& h : hierarchies)
    if (h.v2 && h.controllers.count(c)) return &h;
  for (const auto& h : hierarchies)
    if (!h.v2 && h.controllers.count(c)) return &h;
  return nullptr;
}

std::string CgroupLayout::Describe() const {
  auto where = [](const CgroupHierarchy* h) {
    return h ? std::string(h->v2 ? "v2 " : "v1 ") + h->Dir() : std::string("none");
  };
  std::string s = "membership: " + where(Tracking());
  for (const char* c : kLimitControllers) s += std::string("; ") + c + ": " + where(For(c));
  return s;
}

CgroupLayout CgroupLayout::Detect() {
  const std::string mountinfo = ReadText("/proc/self/mountinfo").value_or("");
  const std::string proc_cgroup = ReadText("/proc/self/cgroup").value_or("");
  CgroupLayout first = ParseCgroupLayout(mountinfo, proc_cgroup, ReadText);
  // On v2, a group's controllers reach the groups made below it only once handed on
  // (cgroup.subtree_control). The kernel refuses that (EBUSY) for a group that holds processes
  // itself, other than the root: there the controllers stay v1's, if any.
  bool handed = false;
  for (const auto& h : first.hierarchies) {
    if (!h.v2) continue;
    const auto available = Words(ReadText(h.Dir() + "/cgroup.controllers").value_or(""), ' ');
    for (const auto& name : available) {
      if ((name == "cpu" || name == "memory" || name == "pids") && !h.controllers.count(name))
        handed = WriteControl(h.Dir() + "/cgroup.subtree_control", "+" + name).ok() || handed;
    }
  }
  return handed ? ParseCgroupLayout(mountinfo, proc_cgroup, ReadText) : first;
}

std::vector<CgroupWrite> CgroupLimitWrites(const CgroupLimits& limits, bool cpu_v2, bool memory_v2,
                                           bool pids_v2) {
  std::vector<CgroupWrite> w;
  if (limits.cpu_cores) {
    const int64_t period = 100000;
    const int64_t quota = std::max<int64_t>(1000, std::llround(*limits.cpu_cores * period));
    if (cpu_v2) {
      w.push_back({"cpu", "cpu.max", std::to_string(quota) + " " + std::to_string(period)});
    } else {
      w.push_back({"cpu", "cpu.cfs_period_us", std::to_string(period)});
      w.push_back({"cpu", "cpu.cfs_quota_us", std::to_string(quota)});
    }
  }
  if (limits.memory_bytes) {
    const std::string bytes = std::to_string(*limits.memory_bytes);
    if (memory_v2) {
      w.push_back({"memory", "memory.max", bytes});
      w.push_back({"memory", "memory.swap.max", "0", true});
    } else {
      // memory+swap may never be below memory alone: written around it, it holds whether the
      // limit goes up or down (the first write fails harmlessly when it goes down).
      w.push_back({"memory", "memory.memsw.limit_in_bytes", bytes, true});
      w.push_back({"memory", "memory.limit_in_bytes", bytes});
      w.push_back({"memory", "memory.memsw.limit_in_bytes", bytes, true});
    }
  }
  if (limits.tasks) w.push_back({"pids", "pids.max", std::to_string(*limits.tasks)});
  (void)pids_v2;  // pids.max is spelt the same in both
  return w;
}

int64_t CgroupCounter(std::string_view text, std::string_view key) {
  for (const auto& line : Words(text, '\n')) {
    const auto w = Words(line, ' ');
    if (w.size() == 2 && w[0] == key) return std::strtoll(w[1].c_str(), nullptr, 10);
  }
  return 0;
}

Cgroup::Cgroup(std::string name, std::vector<Dir> dirs) : name_(std::move(name)), dirs_(std::move(dirs)) {
  for (const auto& d : dirs_) procs_files_.push_back(d.path + "/cgroup.procs");
}

namespace {

StatusOr<std::vector<std::pair<const CgroupHierarchy*, std::set<std::string>>>> Needed(
    const CgroupLayout& layout, bool with_limits) {
  const CgroupHierarchy* tracking = layout.Tracking();
  if (!tracking)
    return Status::FailedPrecondition(
        "no control group hierarchy is mounted (looked in /proc/self/mountinfo)");
  std::vector<std::pair<const CgroupHierarchy*, std::set<std::string>>> need = {{tracking, {""}}};
  if (!with_limits) return need;
  for (const char* c : kLimitControllers) {
    const CgroupHierarchy* h = layout.For(c);
    if (!h)
      return Status::FailedPrecondition(std::string("no control group controller '") + c +
                                        "' for job limits (" + layout.Describe() + ")");
    auto same = std::find_if(need.begin(), need.end(), [&](const auto& n) { return n.first == h; });
    if (same != need.end()) {
      same->second.insert(c);
    } else {
      need.push_back({h, {c}});
    }
  }
  return need;
}

bool ValidName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.size() <= 200;
}

}  // namespace

StatusOr<std::unique_ptr<Cgroup>> Cgroup::Create(const CgroupLayout& layout, const std::string& name,
                                                 bool with_limits) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Dir> dirs, Planned(layout, name, with_limits));
  for (const auto& d : dirs) TESSERA_RETURN_IF_ERROR(MakeDir(d.path));
  return std::unique_ptr<Cgroup>(new Cgroup(name, std::move(dirs)));
}

StatusOr<std::unique_ptr<Cgroup>> Cgroup::Open(const CgroupLayout& layout, const std::string& name,
                                               bool with_limits) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Dir> planned, Planned(layout, name, with_limits));
  std::vector<Dir> dirs;
  for (auto& d : planned) {
    struct stat st {};
    const bool there = ::stat(d.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    // Without its membership directory it is gone; a limit's directory may be gone already.
    if (!there && dirs.empty()) return Status::NotFound("no control group " + d.path);
    if (there) dirs.push_back(std::move(d));
  }
  return std::unique_ptr<Cgroup>(new Cgroup(name, std::move(dirs)));
}

StatusOr<std::vector<Cgroup::Dir>> Cgroup::Planned(const CgroupLayout& layout, const std::string& name,
                                                   bool with_limits) {
  if (!ValidName(name)) return Status::InvalidArgument("'" + name + "' is not a control group name");
  TESSERA_ASSIGN_OR_RETURN(auto need, Needed(layout, with_limits));
  std::vector<Dir> dirs;
  for (const auto& [h, ctrls] : need) dirs.push_back({h->Dir() + "/" + name, h->v2, ctrls});
  return dirs;
}

StatusOr<std::unique_ptr<Cgroup>> Cgroup::Child(const std::string& name) const {
  if (!ValidName(name)) return Status::InvalidArgument("'" + name + "' is not a control group name");
  std::vector<Dir> dirs = {{dirs_.front().path + "/" + name, dirs_.front().v2, {""}, true}};
  TESSERA_RETURN_IF_ERROR(MakeDir(dirs.front().path));
  // Limits held in other hierarchies than membership are this group's own directories there; a
  // v2 limit below a v2 membership is inherited by the subgroup anyway.
  for (size_t i = 1; i < dirs_.size(); ++i) {
    if (dirs_[i].v2 && dirs_.front().v2) continue;
    Dir borrowed = dirs_[i];
    borrowed.owned = false;
    dirs.push_back(std::move(borrowed));
  }
  return std::unique_ptr<Cgroup>(new Cgroup(name, std::move(dirs)));
}

std::string Cgroup::DirOf(std::string_view controller) const {
  for (const auto& d : dirs_)
    if (d.controllers.count(std::string(controller))) return d.path;
  return "";
}

Status Cgroup::SetLimits(const CgroupLimits& limits) {
  auto v2_of = [&](const char* c) {
    for (const auto& d : dirs_)
      if (d.controllers.count(c)) return d.v2;
    return false;
  };
  for (const auto& w : CgroupLimitWrites(limits, v2_of("cpu"), v2_of("memory"), v2_of("pids"))) {
    const std::string dir = DirOf(w.controller);
    if (dir.empty())
      return Status::FailedPrecondition("control group " + name_ + " has no " + w.controller + " controller");
    Status s = WriteControl(dir + "/" + w.file, w.value);
    if (!s.ok() && !w.optional) return s;
  }
  return Status::OK();
}

Status Cgroup::Join(pid_t pid) const {
  for (const auto& f : procs_files_) TESSERA_RETURN_IF_ERROR(WriteControl(f, std::to_string(pid)));
  return Status::OK();
}

std::vector<pid_t> Cgroup::Pids() const {
  std::vector<pid_t> pids;
  std::vector<std::string> subs;
  SubgroupsDeepestFirst(dir(), 0, &subs);
  for (const auto& s : subs) ReadPids(s, &pids);
  ReadPids(dir(), &pids);
  return pids;
}

int Cgroup::Signal(int sig) const {
  int n = 0;
  for (pid_t p : Pids()) n += ::kill(p, sig) == 0;
  return n;
}

Status Cgroup::Kill(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // cgroup.kill (Linux 5.14, v2) ends the group and its subgroups at once, forks in flight too.
  const bool one_write = dirs_.front().v2 && WriteControl(dir() + "/cgroup.kill", "1").ok();
  for (int round = 0;; ++round) {
    if (!one_write) Signal(SIGKILL);
    const auto left = Pids();
    if (left.empty()) return Status::OK();
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string which;
      for (size_t i = 0; i < left.size() && i < 5; ++i) which += (i ? ", " : "") + std::to_string(left[i]);
      return Status::DeadlineExceeded("control group " + dir() + " still holds " +
                                      std::to_string(left.size()) + " process(es) after SIGKILL (" + which +
                                      ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(round < 20 ? 2 : 20));
  }
}

CgroupUsage Cgroup::Usage() const {
  CgroupUsage u;
  for (const auto& d : dirs_) {
    if (d.controllers.count("memory")) {
      u.memory_bytes = std::strtoll(
          ReadText(d.path + (d.v2 ? "/memory.current" : "/memory.usage_in_bytes")).value_or("0").c_str(),
          nullptr, 10);
      u.oom_kills = CgroupCounter(
          ReadText(d.path + (d.v2 ? "/memory.events" : "/memory.oom_control")).value_or(""), "oom_kill");
    }
    if (d.controllers.count("pids")) {
      u.tasks = std::strtoll(ReadText(d.path + "/pids.current").value_or("0").c_str(), nullptr, 10);
      u.tasks_refused = CgroupCounter(ReadText(d.path + "/pids.events").value_or(""), "max");
    }
  }
  return u;
}

Status Cgroup::Remove() const {
  // Every directory is tried (a process still leaving one hierarchy does not keep the others).
  Status first;
  for (const auto& d : dirs_) {
    if (!d.owned) continue;
    std::vector<std::string> subs;
    SubgroupsDeepestFirst(d.path, 0, &subs);
    subs.push_back(d.path);
    for (const auto& s : subs) {
      if (::rmdir(s.c_str()) == 0 || errno == ENOENT) continue;
      const int err = errno;
      if (first.ok())
        first = Status::Unavailable("cannot remove the control group " + s + ": " + std::strerror(err) +
                                    (err == EBUSY ? " (processes are still in it)" : ""));
    }
  }
  return first;
}

std::optional<pid_t> GroupOwnerPid(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.size() > 9 || digits[0] == '0') return std::nullopt;
  pid_t pid = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  return pid;
}

int RemoveLeftoverGroups(const CgroupLayout& layout, std::string_view prefix) {
  const CgroupHierarchy* tracking = layout.Tracking();
  if (!tracking) return 0;
  std::vector<std::string> names;
  if (DIR* d = ::opendir(tracking->Dir().c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::optional<pid_t> pid = GroupOwnerPid(e->d_name, prefix);
      if (pid && ::kill(*pid, 0) != 0 && errno == ESRCH) names.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  int removed = 0;
  for (const auto& n : names) {
    auto g = Cgroup::Open(layout, n, false);
    if (g.ok() && (*g)->Empty() && (*g)->Remove().ok()) ++removed;
  }
  return removed;
}

StatusOr<std::unique_ptr<Cgroup>> CreateSupervisorGroup(std::string_view prefix) {
  const CgroupLayout layout = CgroupLayout::Detect();
  (void)RemoveLeftoverGroups(layout, prefix);
  return Cgroup::Create(layout, std::string(prefix) + std::to_string(::getpid()), false);
}

}  // namespace tessera
