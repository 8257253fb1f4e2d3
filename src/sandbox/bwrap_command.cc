// The sandbox's command line (see bwrap_command.h).
#include "sandbox/bwrap_command.h"

#include <set>

namespace tessera::sandbox {
namespace {

// "/a/b/c" -> "/a", "/a/b" (its parents, outermost first).
std::vector<std::string> Parents(const std::string& path) {
  std::vector<std::string> out;
  for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    out.push_back(path.substr(0, at));
  return out;
}

}  // namespace

std::vector<RootEntry> SystemEntries(const std::map<std::string, std::string>& links_in_root) {
  std::vector<RootEntry> out = {{"usr", ""}, {"etc", ""}};
  for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    auto it = links_in_root.find(name);
    if (it == links_in_root.end()) continue;
    out.push_back({name, it->second});
  }
  return out;
}

std::vector<std::string> BwrapArgv(const SandboxSpec& spec) {
  std::vector<std::string> a = {"/usr/bin/bwrap",
                                // Namespaces of its own: all but the user namespace (the job runs
                                // as a real, unprivileged user of the host).
                                "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                                "--unshare-cgroup", "--hostname", spec.hostname,
                                // No controlling terminal (TIOCSTI could type into one).
                                "--new-session",
                                // Only what setpriv needs to drop to the job's user; it drops
                                // them before the job's program runs.
                                "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add",
                                "CAP_SETPCAP"};
  std::set<std::string> made = {"/"};
  for (const RootEntry& e : spec.system) {
    const std::string target = "/" + e.name;
    if (e.link_target.empty()) {
      a.insert(a.end(), {"--ro-bind", target, target});
    } else {
      a.insert(a.end(), {"--symlink", e.link_target, target});
    }
    made.insert(target);
  }
  if (!spec.passwd_file.empty()) a.insert(a.end(), {"--ro-bind", spec.passwd_file, "/etc/passwd"});
  if (!spec.group_file.empty()) a.insert(a.end(), {"--ro-bind", spec.group_file, "/etc/group"});
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev"});
  made.insert({"/proc", "/dev"});
  for (const SandboxMount& m : spec.mounts) {
    for (const std::string& p : Parents(m.target)) {
      // Made by bwrap as root, 0700 unless told otherwise: the job could not pass through.
      if (made.insert(p).second) a.insert(a.end(), {"--perms", "0755", "--dir", p});
    }
    a.insert(a.end(), {m.writable ? "--bind" : "--ro-bind", m.source, m.target});
    made.insert(m.target);
  }
  for (const std::string& h : spec.hidden) a.insert(a.end(), {"--perms", "0000", "--tmpfs", h});
  if (!spec.cwd.empty()) a.insert(a.end(), {"--chdir", spec.cwd});
  a.insert(a.end(), {"--", "/usr/bin/setpriv", "--reuid", std::to_string(spec.uid), "--regid",
                     std::to_string(spec.gid), "--clear-groups", "--no-new-privs", "--inh-caps=-all",
                     "--bounding-set=-all", "--"});
  a.insert(a.end(), spec.argv.begin(), spec.argv.end());
  return a;
}

}  // namespace tessera::sandbox
