// Parsing a hosts file (see hosts_file.h).
#include "launch/hosts_file.h"

#include <set>

#include "common/files.h"
#include "common/strings.h"

namespace tessera::launch {

StatusOr<supervise::Role> ParseRole(const std::string& name) {
  for (supervise::Role r : {supervise::Role::kEtcd, supervise::Role::kMaster, supervise::Role::kPserver,
                            supervise::Role::kTrainer}) {
    if (name == supervise::RoleName(r)) return r;
  }
  return Status::InvalidArgument("unknown role '" + name + "' (etcd, master, pserver or trainer)");
}

StatusOr<std::vector<HostEntry>> ParseHostsFile(const std::string& text, const std::string& origin) {
  std::vector<HostEntry> hosts;
  std::set<std::string> seen;
  int n = 0;
  for (const std::string& raw : Split(text, '\n', /*skip_empty=*/false)) {
    ++n;
    std::string line = raw.substr(0, raw.find('#'));
    for (char& c : line) {
      if (c == '\t' || c == '\r') c = ' ';
    }
    const std::vector<std::string> words = Split(line, ' ');
    if (words.empty()) continue;
    auto fail = [&](const std::string& what) {
      return Status::InvalidArgument(origin + ":" + std::to_string(n) + ": " + what);
    };
    HostEntry h;
    h.line = n;
    std::string dest = words[0];
    if (size_t at = dest.find('@'); at != std::string::npos) {
      h.user = dest.substr(0, at);
      dest = dest.substr(at + 1);
      if (h.user.empty()) return fail("'" + words[0] + "' has an empty user name before '@'");
    }
    if (!dest.empty() && dest[0] == '[') {  // [v6]:port
      size_t close = dest.find(']');
      if (close == std::string::npos) return fail("'" + words[0] + "': no ']' after an IPv6 address");
      h.address = dest.substr(1, close - 1);
      dest = dest.substr(close + 1);
      if (!dest.empty() && dest[0] != ':') return fail("'" + words[0] + "': expected ':port' after ']'");
    } else {
      size_t colon = dest.find(':');
      h.address = dest.substr(0, colon);
      dest = colon == std::string::npos ? "" : dest.substr(colon);
    }
    if (h.address.empty()) return fail("no host address in '" + words[0] + "'");
    if (!dest.empty()) {
      auto port = ParseInt64(dest.substr(1), "ssh port");
      if (!port.ok() || *port < 1 || *port > 65535)
        return fail("'" + dest.substr(1) + "' is not an ssh port (1-65535)");
      h.ssh_port = static_cast<int>(*port);
    }
    for (size_t i = 1; i < words.size(); ++i) {
      auto role = ParseRole(words[i]);
      if (!role.ok()) return fail(role.status().message());
      h.roles.insert(*role);
    }
    if (h.roles.empty())
      h.roles = {supervise::Role::kMaster, supervise::Role::kPserver, supervise::Role::kTrainer};
    const std::string key = h.Destination() + ":" + std::to_string(h.ssh_port);
    if (!seen.insert(key).second) return fail(key + " is listed twice (give one line its roles)");
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) return Status::InvalidArgument(origin + ": no hosts (one per line: [user@]address[:port] [roles])");
  return hosts;
}

StatusOr<std::vector<HostEntry>> LoadHostsFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status().WithContext("reading the hosts file");
  return ParseHostsFile(*text, path);
}

}  // namespace tessera::launch
