// Peer credentials (see peer_cred.h).
#include "security/peer_cred.h"

#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera::security {
namespace {

std::string UserName(uid_t uid) {
  char buf[1024];
  passwd pw{}, *out = nullptr;
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &out) == 0 && out)
    return std::string(out->pw_name) + " (uid " + std::to_string(uid) + ")";
  return "uid " + std::to_string(uid);
}

}  // namespace

StatusOr<PeerCred> PeerCredentials(int unix_fd) {
  ucred c{};
  socklen_t len = sizeof c;
  if (::getsockopt(unix_fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) {
    return Status::Unavailable(std::string("cannot read the peer's credentials (SO_PEERCRED): ") +
                               std::strerror(errno));
  }
  return PeerCred{c.pid, c.uid, c.gid};
}

Status CheckSameUser(int unix_fd, const std::string& who) {
  TESSERA_ASSIGN_OR_RETURN(PeerCred c, PeerCredentials(unix_fd));
  const uid_t me = ::geteuid();
  if (c.uid == me) return Status::OK();
  return Status::PermissionDenied(who + " (pid " + std::to_string(c.pid) + ") runs as " + UserName(c.uid) +
                                  ", not as " + UserName(me) +
                                  ": shared memory is served to one's own user only");
}

}  // namespace tessera::security
