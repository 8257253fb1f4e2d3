// A small network of "hosts" for tests: network namespaces the test creates itself, joined by
// veth pairs to a bridge in a switch namespace of their own. Each host has one address on
// 10.213.X.0/24 and, if asked, an /etc/hosts of its own (`ip netns exec` bind-mounts
// /etc/netns/<ns>/hosts), so names such as Kubernetes Service names resolve. Processes started on
// a host run under `ip netns exec`; a host can be cut off (its switch port down) or killed (every
// process in it SIGKILLed), and its link given a cluster's rate and latency (ShapeLink: tc tbf, netem).
// Everything is removed by the destructor, even after a failed assertion.
// Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN): Open() says why not, and the test skips.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/subprocess.h"

namespace tessera::testing {

class NetLab {
 public:
  NetLab() : tag_("tsn" + std::to_string(::getpid() % 100000)), subnet_("10.213." + std::to_string(::getpid() % 250 + 1) + ".") {}
  ~NetLab() {
    procs_.clear();  // SIGKILL and reap whatever still runs
    for (const auto& [name, n] : hosts_) KillHost(name);
    for (const auto& ns : namespaces_) {
      (void)Sh("ip netns del " + ns);
      std::error_code ec;
      std::filesystem::remove_all("/etc/netns/" + ns, ec);
    }
  }
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  // Runs a shell command; returns its exit code, its output in *out.
  static int Sh(const std::string& cmd, std::string* out = nullptr) {
    FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!f) return -1;
    char buf[512];
    std::string text;
    while (fgets(buf, sizeof buf, f)) text += buf;
    int rc = ::pclose(f);
    if (out) *out = text;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  // Creates the switch. False, with the reason in *why, where namespaces cannot be made.
  bool Open(std::string* why) {
    if (::geteuid() != 0) {
      *why = "not root";
      return false;
    }
    if (Sh("ip netns add " + Ns("sw"), why) != 0) return false;
    namespaces_.push_back(Ns("sw"));
    return Sh("ip -n " + Ns("sw") + " link add br0 type bridge && ip -n " + Ns("sw") + " link set br0 up", why) ==
           0;
  }

  // Adds host `name` at <subnet>.<n>.
  ::testing::AssertionResult AddHost(const std::string& name, int n) {
    const std::string ns = Ns(name), a = tag_ + name + "a", b = Port(name), sw = Ns("sw");
    if (a.size() > 15) return ::testing::AssertionFailure() << "host name too long for an interface: " << name;
    for (const std::string& cmd :
         {"ip netns add " + ns, "ip link add " + a + " type veth peer name " + b, "ip link set " + a + " netns " + ns,
          "ip link set " + b + " netns " + sw, "ip -n " + ns + " addr add " + subnet_ + std::to_string(n) + "/24 dev " + a,
          "ip -n " + ns + " link set " + a + " up", "ip -n " + ns + " link set lo up",
          "ip -n " + sw + " link set " + b + " master br0", "ip -n " + sw + " link set " + b + " up"}) {
      std::string out;
      if (Sh(cmd, &out) != 0) return ::testing::AssertionFailure() << cmd << ": " << out;
      if (cmd.rfind("ip netns add", 0) == 0) namespaces_.push_back(ns);
    }
    hosts_[name] = n;
    return ::testing::AssertionSuccess();
  }

  // The host's /etc/hosts: localhost, the host itself, and `names` (name -> address).
  void SetHostsFile(const std::string& host, const std::map<std::string, std::string>& names) {
    const std::string dir = "/etc/netns/" + Ns(host);
    std::filesystem::create_directories(dir);
    std::ofstream f(dir + "/hosts");
    f << "127.0.0.1 localhost\n" << Ip(host) << " " << host << "\n";
    for (const auto& [name, ip] : names) f << ip << " " << name << "\n";
  }

  std::string Ns(const std::string& host) const { return tag_ + host; }
  std::string Ip(const std::string& host) const { return subnet_ + std::to_string(hosts_.at(host)); }
  std::string Ip(int n) const { return subnet_ + std::to_string(n); }
  std::string Port(const std::string& host) const { return tag_ + host + "b"; }

  // Starts argv on `host`, its output in `log_path`.
  Subprocess& Start(const std::string& host, std::vector<std::string> argv, const std::string& log_path,
                    std::map<std::string, std::string> env = {}) {
    SpawnOptions o;
    o.argv = {"/usr/sbin/ip", "netns", "exec", Ns(host)};
    o.argv.insert(o.argv.end(), argv.begin(), argv.end());
    o.log_path = log_path;
    o.env = std::move(env);
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok()) << p.status();
    procs_.push_back(std::move(*p));
    return *procs_.back();
  }

  // The command line of a one-member etcd on `host` (clients at EtcdEndpoint(host)), its data in
  // `data_dir`.
  std::vector<std::string> EtcdArgv(const std::string& host, const std::string& data_dir) const {
    const std::string ip = Ip(host), client = "http://" + EtcdEndpoint(host), peer = "http://" + ip + ":2380";
    return {"/usr/bin/etcd",
            "--name=" + host,
            "--data-dir=" + data_dir,
            "--listen-client-urls=" + client,
            "--advertise-client-urls=" + client,
            "--listen-peer-urls=" + peer,
            "--initial-advertise-peer-urls=" + peer,
            "--initial-cluster=" + host + "=" + peer,
            "--log-level=warn"};
  }
  std::string EtcdEndpoint(const std::string& host) const { return Ip(host) + ":2379"; }

  // Cuts the host off the switch (or puts it back).
  ::testing::AssertionResult SetLink(const std::string& host, bool up) {
    std::string out;
    if (Sh("ip -n " + Ns("sw") + " link set " + Port(host) + (up ? " up" : " down"), &out) != 0)
      return ::testing::AssertionFailure() << out;
    return ::testing::AssertionSuccess();
  }

  // Makes the host's link to the switch a cluster's link: at most `mbit` Mbit/s each way, by a
  // token bucket (tc tbf) on both of its ends (the host's interface and its switch port), and
  // `delay_us` more latency each way (tc netem, where the kernel has it: HasNetem()). A path
  // between two shaped hosts crosses two links: its rate is the smaller, its one-way latency the
  // sum; several hosts sending to one share its link, as on a switch. Replaces an earlier shape.
  ::testing::AssertionResult ShapeLink(const std::string& host, int64_t mbit, int64_t delay_us = 0) {
    if (mbit <= 0 || delay_us < 0)
      return ::testing::AssertionFailure() << "a rate of " << mbit << " Mbit/s, " << delay_us << " us";
    // The bucket holds 1 ms of the rate (at least a 64 KiB segment that the veth hands over
    // whole); the queue at most 20 ms, as a switch port's buffer.
    const int64_t burst = std::max<int64_t>(128 << 10, mbit * 1000000 / 8 / 1000);
    for (const auto& [ns, dev] : {std::pair{Ns(host), tag_ + host + "a"}, std::pair{Ns("sw"), Port(host)}}) {
      std::vector<std::string> cmds = {"tc -n " + ns + " qdisc del dev " + dev + " root 2>/dev/null; true"};
      const std::string tbf =
          "tbf rate " + std::to_string(mbit) + "mbit burst " + std::to_string(burst) + " latency 20ms";
      if (delay_us > 0) {
        cmds.push_back("tc -n " + ns + " qdisc add dev " + dev + " root handle 1: netem delay " +
                       std::to_string(delay_us) + "us limit 100000");
        cmds.push_back("tc -n " + ns + " qdisc add dev " + dev + " parent 1:1 handle 10: " + tbf);
      } else {
        cmds.push_back("tc -n " + ns + " qdisc add dev " + dev + " root handle 1: " + tbf);
      }
      for (const auto& cmd : cmds) {
        std::string out;
        if (Sh(cmd, &out) != 0) return ::testing::AssertionFailure() << cmd << ": " << out;
      }
    }
    return ::testing::AssertionSuccess();
  }

  // Takes a ShapeLink shape off the host's link (nothing to take off is fine).
  bool Unshape(const std::string& host) {
    for (const auto& [ns, dev] : {std::pair{Ns(host), tag_ + host + "a"}, std::pair{Ns("sw"), Port(host)}}) {
      std::string out;
      if (Sh("tc -n " + ns + " qdisc del dev " + dev + " root", &out) != 0 &&
          out.find("No such file") == std::string::npos &&
          out.find("Cannot delete qdisc with handle of zero") == std::string::npos)
        return false;
    }
    return true;
  }

  // Whether this kernel can delay packets (the netem qdisc; some VMs' kernels are built without
  // it, and then ShapeLink gives rates only). Tries it on a veth pair of its own.
  bool HasNetem() {
    const std::string ns = Ns("probe"), a = tag_ + "pra", b = tag_ + "prb";
    if (Sh("ip netns add " + ns) != 0) return false;
    namespaces_.push_back(ns);
    const bool ok = Sh("ip -n " + ns + " link add " + a + " type veth peer name " + b) == 0 &&
                    Sh("tc -n " + ns + " qdisc add dev " + a + " root netem delay 100us") == 0;
    return ok;
  }

  // SIGKILLs every process in the host's namespace, as if the machine had lost power.
  void KillHost(const std::string& host) { (void)Sh("ip netns pids " + Ns(host) + " | xargs -r kill -9"); }

 private:
  std::string tag_, subnet_;
  std::map<std::string, int> hosts_;
  std::vector<std::string> namespaces_;
  std::vector<std::unique_ptr<Subprocess>> procs_;
};

}  // namespace tessera::testing
