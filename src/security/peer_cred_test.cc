// Unit test of peer credentials on a socket pair of this process.
#include "security/peer_cred.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tessera::security {
namespace {

TEST(PeerCred, ReadsThisProcessOnASocketPair) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds), 0);
  auto c = PeerCredentials(fds[0]);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pid, ::getpid());
  EXPECT_EQ(c->uid, ::geteuid());
  EXPECT_TRUE(CheckSameUser(fds[1], "the peer").ok());
  ::close(fds[0]);
  ::close(fds[1]);
  // Not a Unix socket: an error, not a guess.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  EXPECT_FALSE(PeerCredentials(p[0]).ok());
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace tessera::security
