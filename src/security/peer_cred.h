// The credentials of the process at the other end of a Unix socket (SO_PEERCRED), for the
// shared-memory transport: a pserver serves, and a trainer talks to, processes of its own user
// only. Thread-safe.
#pragma once

#include <sys/types.h>

#include <string>

#include "tessera/status.h"

namespace tessera::security {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

StatusOr<PeerCred> PeerCredentials(int unix_fd);

// OK if the peer runs as this process's effective user; PermissionDenied naming both users
// otherwise. `who` names the peer in the message ("the trainer", "the pserver at @...").
Status CheckSameUser(int unix_fd, const std::string& who);

}  // namespace tessera::security
