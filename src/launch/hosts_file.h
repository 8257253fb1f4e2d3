// HostsFile: the machines `tessera launch --hosts FILE` runs a job on, and what each may run.
// One host per line: `[user@]address[:ssh-port] [role ...]`, roles from etcd, master, pserver,
// trainer (none: master pserver trainer); `#` starts a comment. Every mistake is named by its
// line ("hosts.txt:3: ..."). Pure; a value type.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "supervise/restart_policy.h"
#include "tessera/status.h"

namespace tessera::launch {

struct HostEntry {
  std::string user;     // empty: ssh's default (the current user, or ~/.ssh/config)
  std::string address;  // a name or an address every host of the job reaches this one at
  int ssh_port = 22;
  std::set<supervise::Role> roles;
  int line = 0;
  // "user@address" (or "address") for ssh.
  std::string Destination() const { return user.empty() ? address : user + "@" + address; }
};

StatusOr<std::vector<HostEntry>> ParseHostsFile(const std::string& text, const std::string& origin);
StatusOr<std::vector<HostEntry>> LoadHostsFile(const std::string& path);

// "etcd", "master", "pserver", "trainer" and back.
StatusOr<supervise::Role> ParseRole(const std::string& name);

}  // namespace tessera::launch
