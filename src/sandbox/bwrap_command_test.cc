// The sandbox's command line: namespaces, the system read-only, the job's own mounts with their
// parents passable, and the drop to the job's user last, with nothing of the host beyond that.
#include "sandbox/bwrap_command.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/strings.h"

namespace tessera::sandbox {
namespace {

SandboxSpec Spec() {
  SandboxSpec s;
  s.uid = 61000007;
  s.gid = 61000007;
  s.hostname = "job-1234";
  s.system =
      SystemEntries({{"bin", "usr/bin"}, {"lib", "usr/lib"}, {"lib64", "usr/lib64"}, {"sbin", "usr/sbin"}});
  s.passwd_file = "/data/jobs/j1/passwd";
  s.group_file = "/data/jobs/j1/group";
  s.mounts = {{"/data/jobs/j1/run", "/job/run", true},
              {"/data/jobs/j1/code", "/job/code", true},
              {"/data/datasets/ada", "/data/ada", false},
              {"/data/datasets/bob/shared", "/data/bob/shared", false}};
  s.cwd = "/job/run";
  s.argv = {"/opt/tessera/bin/tessera", "local", "--run", "/job/run"};
  return s;
}

// The arguments after `flag`, each time it appears, as "a b" strings.
std::vector<std::string> After(const std::vector<std::string>& a, const std::string& flag, int n) {
  std::vector<std::string> out;
  for (size_t i = 0; i + n < a.size(); ++i) {
    if (a[i] != flag) continue;
    std::string s;
    for (int k = 1; k <= n; ++k) s += (k > 1 ? " " : "") + a[i + k];
    out.push_back(s);
  }
  return out;
}

TEST(BwrapCommandTest, EveryNamespaceButTheUsersAndNoControllingTerminal) {
  const auto a = BwrapArgv(Spec());
  EXPECT_EQ(a.front(), "/usr/bin/bwrap");
  for (const char* f : {"--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                        "--unshare-cgroup", "--new-session"})
    EXPECT_NE(std::find(a.begin(), a.end(), f), a.end()) << f;
  for (const char* f : {"--unshare-all", "--unshare-user", "--share-net", "--die-with-parent"})
    EXPECT_EQ(std::find(a.begin(), a.end(), f), a.end())
        << f << ": the job runs as a real user and outlives the server";
  EXPECT_EQ(After(a, "--hostname", 1), std::vector<std::string>{"job-1234"});
}

TEST(BwrapCommandTest, TheSystemIsReadOnlyAndTheJobsOwnMountsAreWhereItSaysWithPassableParents) {
  const auto a = BwrapArgv(Spec());
  const auto ro = After(a, "--ro-bind", 2), rw = After(a, "--bind", 2);
  for (const char* m :
       {"/usr /usr", "/etc /etc", "/data/jobs/j1/passwd /etc/passwd", "/data/jobs/j1/group /etc/group",
        "/data/datasets/ada /data/ada", "/data/datasets/bob/shared /data/bob/shared"})
    EXPECT_NE(std::find(ro.begin(), ro.end(), m), ro.end()) << m << " read-only";
  EXPECT_EQ(rw, (std::vector<std::string>{"/data/jobs/j1/run /job/run", "/data/jobs/j1/code /job/code"}))
      << "only the job's own directories are writable";
  EXPECT_EQ(After(a, "--symlink", 2),
            (std::vector<std::string>{"usr/bin /bin", "usr/sbin /sbin", "usr/lib /lib", "usr/lib64 /lib64"}));
  // Parents bwrap makes (as root, 0700 by default) are made passable, once each, before use.
  const auto dirs = After(a, "--dir", 1);
  EXPECT_EQ(dirs, (std::vector<std::string>{"/job", "/data", "/data/bob"}));
  for (const auto& d : dirs) {
    auto at = std::find(a.begin(), a.end(), d);
    ASSERT_GE(at - a.begin(), 3);
    EXPECT_EQ(*(at - 3), "--perms");
    EXPECT_EQ(*(at - 2), "0755");
  }
  auto parent = std::find(a.begin(), a.end(), "/data/bob");
  auto child = std::find(a.begin(), a.end(), "/data/bob/shared");
  EXPECT_LT(parent, child);
  for (const auto& m : ro)
    EXPECT_TRUE(m.find("/home") == std::string::npos && m.find("/root") == std::string::npos &&
                m.find("/var") == std::string::npos && m.find(" /tmp") == std::string::npos)
        << m;
}

TEST(BwrapCommandTest, TheJobsProgramRunsLastAsItsUserWithNoPrivilegeLeft) {
  const auto a = BwrapArgv(Spec());
  auto dashes = std::find(a.begin(), a.end(), "--");
  ASSERT_NE(dashes, a.end());
  const std::vector<std::string> tail(dashes + 1, a.end());
  EXPECT_EQ(
      Join(tail, " "),
      "/usr/bin/setpriv --reuid 61000007 --regid 61000007 --clear-groups --no-new-privs --inh-caps=-all "
      "--bounding-set=-all -- /opt/tessera/bin/tessera local --run /job/run");
  // The capabilities bwrap keeps are setpriv's to drop, and no others.
  EXPECT_EQ(After(std::vector<std::string>(a.begin(), dashes), "--cap-add", 1),
            (std::vector<std::string>{"CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"}));
  EXPECT_EQ(After(a, "--chdir", 1), std::vector<std::string>{"/job/run"});
}

TEST(BwrapCommandTest, SystemEntriesTakeWhatTheHostHas) {
  auto e = SystemEntries({{"bin", ""}, {"lib", "usr/lib"}, {"unrelated", "x"}});
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].name, "usr");
  EXPECT_EQ(e[1].name, "etc");
  EXPECT_EQ(e[2].name, "bin");
  EXPECT_EQ(e[2].link_target, "") << "a directory of its own on this host: bound as it is";
  EXPECT_EQ(e[3].link_target, "usr/lib");
}

}  // namespace
}  // namespace tessera::sandbox
