// The command line that runs a platform job in its sandbox (pure; see docs/security.md,
// "Sandboxes"). Debian's bubblewrap (`bwrap`), started by the server as root, makes the job's
// namespaces (mount, PID, IPC, network, UTS, cgroup) and mounts, and `setpriv` then drops the
// job's first process to the job's Unix user with no capability left and no way to gain one
// (no_new_privs: setuid programs do nothing). bwrap runs privileged rather than as the job's user
// so that it can bind what the job may use from directories the job's user cannot reach (the
// server's data directory is root's alone); the job's processes never hold a privilege.
//
// What the job sees:
//   /usr, /etc and the root's links to them (/bin, /lib, ...)   the host's, read-only
//   /etc/passwd, /etc/group                                   its own (its user by name)
//   /proc, /dev                                               its own PID namespace's, a minimal /dev
//   each SandboxMount                                         read-only unless `writable`
// and nothing else: no /home, /root, /var, /run, /tmp of the host, no data directory.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace tessera::sandbox {

struct SandboxMount {
  std::string source;  // host path
  std::string target;  // where the job sees it
  bool writable = false;
};

// An entry of the host's root directory the job gets read-only: a directory bound as it is, or a
// link recreated as it is (Debian's merged /usr: /bin -> usr/bin).
struct RootEntry {
  std::string name;         // "usr", "bin"
  std::string link_target;  // "usr/bin" for a link; "" for a directory
};

struct SandboxSpec {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string hostname;                 // its UTS name
  std::vector<RootEntry> system;        // from the host's root, read-only
  std::string passwd_file, group_file;  // host files bound over /etc/passwd and /etc/group
  std::vector<SandboxMount> mounts;     // in order; a target's missing parents are made (0755)
  // Paths hidden under an empty tmpfs after the mounts (the server's data directory, should a
  // mount above hold it).
  std::vector<std::string> hidden;
  std::string cwd;                // where its first process starts
  std::vector<std::string> argv;  // its first process (argv[0] a path the job sees)
};

// The system entries of a host: usr and etc, and those of bin, sbin, lib, lib32, lib64 and libx32
// that `links_in_root` holds (name -> a link's target, or "" for a directory; absent: none).
std::vector<RootEntry> SystemEntries(const std::map<std::string, std::string>& links_in_root);

// The full command line: /usr/bin/bwrap ... -- /usr/bin/setpriv ... -- argv. Its environment is
// the one bwrap is started with (the caller's allowlist), passed through unchanged.
std::vector<std::string> BwrapArgv(const SandboxSpec& spec);

}  // namespace tessera::sandbox
