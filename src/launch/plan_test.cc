// Unit tests of the launch plan: hosts files, placement, the node and mpirun command lines.
#include "launch/plan.h"

#include <gtest/gtest.h>

#include <map>

#include "common/fake_getenv.h"
#include "launch/hosts_file.h"

namespace tessera::launch {
namespace {

using supervise::Role;

spec::JobSpec Spec(int masters, int pservers, int trainers) {
  spec::JobSpec s;
  s.name = "j";
  s.masters = masters;
  s.pservers = pservers;
  s.trainers_min = 1;
  s.trainers_max = trainers;
  return s;
}

TEST(HostsFileTest, ParsesUsersPortsRolesAndComments) {
  auto h = ParseHostsFile(
      "# the cluster\n"
      "root@10.0.0.1 etcd master   # head\n"
      "\n"
      "10.0.0.2:2222\tpserver trainer\r\n"
      "[fd00::3]:22\n"
      "node4\n",
      "hosts.txt");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 4u);
  EXPECT_EQ((*h)[0].Destination(), "root@10.0.0.1");
  EXPECT_EQ((*h)[0].roles, (std::set<Role>{Role::kEtcd, Role::kMaster}));
  EXPECT_EQ((*h)[0].line, 2);
  EXPECT_EQ((*h)[1].address, "10.0.0.2");
  EXPECT_EQ((*h)[1].ssh_port, 2222);
  EXPECT_EQ((*h)[1].roles, (std::set<Role>{Role::kPserver, Role::kTrainer}));
  EXPECT_EQ((*h)[1].line, 4);
  EXPECT_EQ((*h)[2].address, "fd00::3");
  EXPECT_EQ((*h)[3].roles, (std::set<Role>{Role::kMaster, Role::kPserver, Role::kTrainer}));
}

TEST(HostsFileTest, EveryMistakeNamesItsLine) {
  const std::map<std::string, std::string> bad = {
      {"h1\nh2 trainr\n", "hosts:2: unknown role 'trainr'"},
      {"h1:0\n", "hosts:1: '0' is not an ssh port"},
      {"h1:ssh\n", "hosts:1: 'ssh' is not an ssh port"},
      {"@h1\n", "hosts:1: '@h1' has an empty user name"},
      {"h1\nh1 pserver\n", "hosts:2: h1:22 is listed twice"},
      {"[fd00::1\n", "hosts:1: '[fd00::1': no ']'"},
      {"# nothing\n\n", "hosts: no hosts"},
  };
  for (const auto& [text, want] : bad) {
    auto h = ParseHostsFile(text, "hosts");
    ASSERT_FALSE(h.ok()) << text;
    EXPECT_NE(h.status().message().find(want), std::string::npos) << h.status().message();
  }
}

TEST(PlacementTest, SpreadsRolesOverTheLeastLoadedHosts) {
  auto hosts = ParseHostsFile("a\nb\nc\n", "h");
  ASSERT_TRUE(hosts.ok());
  auto plan = PlaceNodes(Spec(2, 2, 2), *hosts, true, "h");
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::pair<std::string, size_t>> got;
  for (const auto& p : *plan) got.push_back({p.Name(), p.host});
  const std::vector<std::pair<std::string, size_t>> want = {{"etcd-0", 0},    {"master-0", 1},  {"master-1", 2},
                                                            {"pserver-0", 0}, {"pserver-1", 1}, {"trainer-0", 2},
                                                            {"trainer-1", 0}};
  EXPECT_EQ(got, want);
}

TEST(PlacementTest, HonoursRolesAndTheEtcdHost) {
  auto hosts = ParseHostsFile("a trainer\nb etcd master pserver\nc trainer\n", "h");
  ASSERT_TRUE(hosts.ok());
  auto plan = PlaceNodes(Spec(1, 2, 3), *hosts, true, "h");
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const auto& p : *plan) {
    const bool on_b = p.host == 1;
    EXPECT_EQ(on_b, p.role != Role::kTrainer) << p.Name() << " on " << p.host;
  }
  // Without etcd (external), no etcd node; an etcd role is then not needed.
  auto external = PlaceNodes(Spec(1, 1, 1), *hosts, false, "h");
  ASSERT_TRUE(external.ok());
  EXPECT_EQ(external->front().role, Role::kMaster);
}

TEST(PlacementTest, RefusesARoleNoHostMayRun) {
  auto hosts = ParseHostsFile("a master pserver\n", "hosts.txt");
  ASSERT_TRUE(hosts.ok());
  auto plan = PlaceNodes(Spec(1, 1, 2), *hosts, false, "hosts.txt");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("hosts.txt: no host may run a trainer"), std::string::npos)
      << plan.status();
  auto two = ParseHostsFile("a etcd\nb etcd\n", "h");
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(PlaceNodes(Spec(0, 0, 0), *two, true, "h").ok());
}

TEST(MpirunTest, OneBlockPerRoleWithItsFirstRank) {
  MpiOptions m;
  m.mpirun = "mpirun";
  m.tessera = "/usr/bin/tessera";
  m.etcd = "10.0.0.1:2379";
  m.job = "j";
  m.as_root = true;
  const std::vector<std::string> want = {
      "mpirun", "--tag-output", "--bind-to", "none", "--oversubscribe", "--allow-run-as-root",
      "-np", "2", "/usr/bin/tessera", "node", "--role", "master", "--etcd", "10.0.0.1:2379", "--job", "j",
      "--first-rank", "0", ":",
      "-np", "1", "/usr/bin/tessera", "node", "--role", "pserver", "--etcd", "10.0.0.1:2379", "--job", "j",
      "--first-rank", "2", ":",
      "-np", "3", "/usr/bin/tessera", "node", "--role", "trainer", "--etcd", "10.0.0.1:2379", "--job", "j",
      "--first-rank", "3"};
  EXPECT_EQ(MpirunArgv(Spec(2, 1, 3), m), want);
  m.hostfile = "hosts";
  m.as_root = false;
  auto with_hosts = MpirunArgv(Spec(1, 1, 1), m);
  EXPECT_EQ(std::vector<std::string>(with_hosts.begin(), with_hosts.begin() + 6),
            (std::vector<std::string>{"mpirun", "--tag-output", "--bind-to", "none", "--hostfile", "hosts"}));
}

TEST(MpirunTest, RankFromOpenMpiPmixOrMpich) {
  EXPECT_EQ(*RankFromEnvironment(FakeGetenv({{"OMPI_COMM_WORLD_RANK", "4"}, {"PMI_RANK", "9"}})), 4);
  EXPECT_EQ(*RankFromEnvironment(FakeGetenv({{"PMIX_RANK", "2"}})), 2);
  EXPECT_EQ(*RankFromEnvironment(FakeGetenv({{"PMI_RANK", "7"}})), 7);
  EXPECT_EQ(RankFromEnvironment(FakeGetenv({})).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(RankFromEnvironment(FakeGetenv({{"PMI_RANK", "-1"}})).ok());
  EXPECT_FALSE(RankFromEnvironment(FakeGetenv({{"PMI_RANK", "x"}})).ok());
}

TEST(NodeArgsTest, SshNodesCarryIndexAddressAndEof) {
  NodeArgsOptions n;
  n.role = Role::kPserver;
  n.etcd = "e:1";
  n.job = "j";
  n.index = 1;
  n.advertise = "10.0.0.2";
  n.stop_on_eof = true;
  EXPECT_EQ(NodeArgs(n), (std::vector<std::string>{"node", "--role", "pserver", "--etcd", "e:1", "--job", "j",
                                                    "--index", "1", "--advertise", "10.0.0.2", "--stop-on-eof"}));
}

TEST(MpirunTest, LocalSizeFromOpenMpiOrMpich) {
  EXPECT_EQ(
      LocalSizeFromEnvironment(FakeGetenv({{"OMPI_COMM_WORLD_LOCAL_SIZE", "5"}, {"MPI_LOCALNRANKS", "9"}})),
      5);
  EXPECT_EQ(LocalSizeFromEnvironment(FakeGetenv({{"MPI_LOCALNRANKS", "3"}})), 3);
  EXPECT_EQ(LocalSizeFromEnvironment(FakeGetenv({})), 0) << "not under mpirun: not said";
  EXPECT_EQ(LocalSizeFromEnvironment(FakeGetenv({{"OMPI_COMM_WORLD_LOCAL_SIZE", "0"}})), 0);
  EXPECT_EQ(LocalSizeFromEnvironment(FakeGetenv({{"OMPI_COMM_WORLD_LOCAL_SIZE", "x"}})), 0);
}

TEST(NodeArgsTest, ATrainerNodesThreadsComeFromTheLauncherThenMpirunThenNothing) {
  using Env = std::vector<std::pair<std::string, std::string>>;
  const Env four = {{"OMP_NUM_THREADS", "4"}, {"OPENBLAS_NUM_THREADS", "4"}, {"MKL_NUM_THREADS", "4"}};
  const Env two = {{"OMP_NUM_THREADS", "2"}, {"OPENBLAS_NUM_THREADS", "2"}, {"MKL_NUM_THREADS", "2"}};
  EXPECT_EQ(NodeMathThreadEnv(2, 8, FakeGetenv({{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}})), four)
      << "the ssh launcher's count wins";
  EXPECT_EQ(NodeMathThreadEnv(0, 8, FakeGetenv({{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}})), two)
      << "mpirun's local size";
  EXPECT_TRUE(NodeMathThreadEnv(0, 8, FakeGetenv({})).empty()) << "nobody said how many share the host";
  EXPECT_TRUE(NodeMathThreadEnv(2, 8, FakeGetenv({{"OPENBLAS_NUM_THREADS", "8"}})).empty())
      << "the user chose";
}

TEST(NodeArgsTest, ANodesBusyPollingComesFromTheLauncherThenMpirunThenNothing) {
  using Env = std::vector<std::pair<std::string, std::string>>;
  const Env on = {{"TESSERA_BUSY_POLL_US", "1000"}}, off = {{"TESSERA_BUSY_POLL_US", "0"}};
  EXPECT_EQ(NodeBusyPollEnv(2, 8, FakeGetenv({{"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}})), on)
      << "the ssh launcher's count wins";
  EXPECT_EQ(NodeBusyPollEnv(0, 8, FakeGetenv({{"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}})), on) << "mpirun's";
  EXPECT_EQ(NodeBusyPollEnv(0, 8, FakeGetenv({{"OMPI_COMM_WORLD_LOCAL_SIZE", "9"}})), off);
  EXPECT_EQ(NodeBusyPollEnv(0, 8, FakeGetenv({{"MPI_LOCALNRANKS", "3"}})), on);
  EXPECT_TRUE(NodeBusyPollEnv(0, 8, FakeGetenv({})).empty()) << "nobody said how many share the host";
  EXPECT_TRUE(NodeBusyPollEnv(2, 8, FakeGetenv({{"TESSERA_BUSY_POLL_US", "50"}})).empty())
      << "the user chose";
}

TEST(NodeArgsTest, SshNodesSayHowManyProcessesShareTheirHost) {
  std::vector<NodePlan> plan = {{Role::kEtcd, 0, 0},    {Role::kMaster, 0, 0},  {Role::kPserver, 0, 1},
                                {Role::kPserver, 1, 0}, {Role::kTrainer, 0, 1}, {Role::kTrainer, 1, 0}};
  EXPECT_EQ(ProcessesOnHost(plan, 0), 3) << "master, pserver 1 and trainer 1; etcd not counted";
  EXPECT_EQ(ProcessesOnHost(plan, 1), 2);
  EXPECT_EQ(ProcessesOnHost(plan, 2), 0);
  NodeArgsOptions n;
  n.role = Role::kTrainer;
  n.etcd = "e:1";
  n.job = "j";
  n.index = 0;
  n.host_processes = 2;
  EXPECT_EQ(NodeArgs(n), (std::vector<std::string>{"node", "--role", "trainer", "--etcd", "e:1", "--job", "j",
                                                   "--index", "0", "--host-processes", "2"}));
}

TEST(MpirunTest, TheFirstFailedRanksOwnLines) {
  std::string out = "[1,0]<stderr>:tessera node: master-0 starting\n"
                    "[1,2]<stderr>:tessera node: pserver-0: stopping, as asked by a signal\n"
                    "[1,0]<stderr>:tessera master: no data set at '/s/fmx'\n"
                    "--------\nmpirun detected that one or more processes exited with non-zero status\n"
                    "  Process name: [[8100,1],0]\n  Exit code:    1\n";
  std::string got = FailedRankLines(out);
  EXPECT_EQ(got.rfind("rank 0 failed first.", 0), 0u) << got;
  EXPECT_NE(got.find("no data set at '/s/fmx'"), std::string::npos) << got;
  EXPECT_EQ(got.find("pserver-0"), std::string::npos) << got;  // not the others' stopping
  // Rank 12 is not rank 1 (tags are matched whole), and only the last 12 lines are kept.
  std::string many;
  for (int i = 0; i < 20; ++i) many += "[1,12]<stdout>:line " + std::to_string(i) + "\n[1,1]<stdout>:other\n";
  got = FailedRankLines(many + "Process name: [[7,1],12]\n");
  EXPECT_EQ(got.find("other"), std::string::npos) << got;
  EXPECT_NE(got.find("line 19"), std::string::npos);
  EXPECT_EQ(got.find("line 7\n"), std::string::npos);
  EXPECT_EQ(FailedRankLines("mpirun: nothing failed\n"), "");
  EXPECT_EQ(FailedRankLines("Process name: [[garbled"), "");
}

TEST(MpirunTest, FirstHostOfAHostfile) {
  EXPECT_EQ(FirstHostInHostfile("# cluster\n\n  node1 slots=4\nnode2\n"), "node1");
  EXPECT_EQ(FirstHostInHostfile("\tnode3\tslots=2 # head\n"), "node3");
  EXPECT_EQ(FirstHostInHostfile("# only comments\n"), "");
}

TEST(SshTest, UserOptionsComeFirstSoTheyWin) {
  auto hosts = ParseHostsFile("root@10.0.0.2:2222\n", "h");
  ASSERT_TRUE(hosts.ok());
  auto a = SshCommand({"/usr/bin/ssh", {"ConnectTimeout=3"}, "/k"}, (*hosts)[0], "exec tessera node");
  const std::vector<std::string> want = {"/usr/bin/ssh", "-o", "ConnectTimeout=3", "-i", "/k", "-o", "BatchMode=yes",
                                         "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5", "-o",
                                         "ServerAliveCountMax=6", "-p", "2222", "root@10.0.0.2", "exec tessera node"};
  EXPECT_EQ(a, want);
}

}  // namespace
}  // namespace tessera::launch
