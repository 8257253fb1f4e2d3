// coord_probe: a separate process for the coordination tests (claims an index, or campaigns in an
// election and keeps writing under its fence), printing what happens on stdout, one line per
// event, so a test can kill -9 / SIGSTOP it and watch the others react. Test-only.
//
//   coord_probe claim    --etcd E --prefix P --n N --ttl T
//       prints "CLAIMED <index> <epoch>" or "NO_FREE_INDEX", then holds the claim until killed.
//   coord_probe campaign --etcd E --prefix P --ttl T --name NAME --fenced-key K
//       prints "LEADER <key> <revision>" once it leads, then every 100 ms writes NAME to K with a
//       fenced transaction; prints "FENCED_WRITE_FAILED <reason>" and exits 4 when one fails.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "coord/election.h"
#include "coord/lease_keeper.h"
#include "coord/registry.h"

using namespace tessera;

static void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  CLI::App app{"coordination probe for tests"};
  std::string endpoint, prefix, name = "probe", fenced_key;
  int n = 4;
  int64_t ttl = 2;
  auto* claim = app.add_subcommand("claim");
  auto* campaign = app.add_subcommand("campaign");
  for (auto* c : {claim, campaign}) {
    c->add_option("--etcd", endpoint)->required();
    c->add_option("--prefix", prefix)->required();
    c->add_option("--ttl", ttl);
  }
  claim->add_option("--n", n);
  campaign->add_option("--name", name);
  campaign->add_option("--fenced-key", fenced_key)->required();
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);

  etcd::EtcdOptions o;
  o.endpoints = {endpoint};
  auto client = etcd::EtcdClient::Create(o);
  if (!client.ok()) {
    Say("ERROR " + client.status().ToString());
    return 2;
  }
  auto keeper = LeaseKeeper::Start(client->get(), {ttl, {}},
                                   [](LeaseState s) { Say(std::string("LEASE ") + LeaseStateName(s)); });
  if (!keeper.ok()) {
    Say("ERROR " + keeper.status().ToString());
    return 2;
  }
  int64_t lease = (*keeper)->id();

  if (claim->parsed()) {
    Registry registry(client->get(), prefix);
    auto c = registry.ClaimIndex(n, "probe pid " + std::to_string(::getpid()), lease);
    if (!c.ok()) {
      if (c.status().code() == StatusCode::kResourceExhausted) {
        Say("NO_FREE_INDEX");
        return 3;
      }
      Say("ERROR " + c.status().ToString());
      return 2;
    }
    Say("CLAIMED " + std::to_string(c->index) + " " + std::to_string(c->epoch));
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }

  Election election(client->get(), prefix, lease);
  Status s = election.Campaign(name);
  if (!s.ok()) {
    Say("ERROR " + s.ToString());
    return 2;
  }
  Say("LEADER " + election.fence().key + " " + std::to_string(election.fence().revision));
  // Write under the fence regardless of what the local lease state says: the fence alone must
  // stop a deposed leader.
  while (true) {
    etcd::Txn txn;
    txn.success.push_back(etcd::Op::Put(fenced_key, name));
    auto r = election.FencedCommit(txn);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kFailedPrecondition) {
        Say("FENCED_WRITE_FAILED " + r.status().message());
        return 4;
      }
      Say("FENCED_WRITE_ERROR " + r.status().ToString());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}
