// linear_trainer: a trainer process for the pserver integration tests. It trains a linear model
// (one dense parameter "w", plus optionally a sparse table) through the Tessera client on the
// deterministic data of linear_data.h and reports, one line per event:
//   STEP <n> LEAD <need - min_clock>   (with --report-leads)
//   FINAL_LOSS <mse>  /  MAX_LEAD <n>  /  DONE
// and writes the final parameters to --out (one value per line). Test-only.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "linear_data.h"
#include "tessera/client.h"

using namespace tessera;

int main(int argc, char** argv) {
  CLI::App app{"linear-model trainer for tests"};
  std::string etcd, job, id, out, optimizer;
  int dim = 100, batch = 8, steps = 10, trainers = 1;
  int sleep_ms = 0;
  bool report_leads = false;
  app.add_option("--etcd", etcd)->required();
  app.add_option("--job", job)->required();
  app.add_option("--id", id);
  app.add_option("--dim", dim);
  app.add_option("--batch", batch);
  app.add_option("--steps", steps);
  app.add_option("--trainers", trainers, "wait for this many trainers before starting");
  app.add_option("--sleep-ms", sleep_ms, "pause per step (a slow trainer)");
  app.add_option("--optimizer", optimizer, "parameter optimizer (default: the job's)");
  app.add_option("--out", out);
  bool pieces = false;
  app.add_flag("--pieces", pieces,
               "push each step in pieces of one block (Client::PushPiece), in an order that depends on the "
               "trainer id");
  bool wait_here = false;
  app.add_flag("--wait-here", wait_here,
               "push and pull with Client::PushPullAndWait (the first pserver's request sent from this "
               "thread) instead of PushPull and Wait");
  app.add_flag("--report-leads", report_leads);
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const std::string& what, const Status& s) {
    std::printf("ERROR %s: %s\n", what.c_str(), s.ToString().c_str());
    std::fflush(stdout);
    return 2;
  };
  ClientOptions o;
  o.connection.etcd_endpoints = {etcd};
  o.connection.job = job;
  o.trainer_id = id;
  o.lease_ttl_seconds = 5;  // room for a loaded 2-core machine; no test here times trainer departures
  o.request_timeout = std::chrono::seconds(60);
  auto client = Client::Connect(o);
  if (!client.ok()) return fail("connect", client.status());
  Client& c = **client;
  std::printf("REGISTERED %s\n", c.trainer_id().c_str());
  std::fflush(stdout);
  std::vector<float> w(dim);
  for (int j = 0; j < dim; ++j) w[j] = testing::InitialWeight(j);
  OptimizerConfig opt;
  if (!optimizer.empty()) {
    auto p = OptimizerConfig::Parse(optimizer);
    if (!p.ok()) return fail("optimizer", p.status());
    opt = *p;
  }
  if (Status s = c.AddDense("w", w.data(), w.size(), optimizer.empty() ? nullptr : &opt); !s.ok())
    return fail("add", s);
  if (Status s = c.WaitForTrainers(trainers, std::chrono::seconds(60)); !s.ok()) {
    // For a post-mortem: every key of the job as etcd has it now, with revisions and leases.
    etcd::EtcdOptions eo;
    eo.endpoints = {etcd};
    if (auto e = etcd::EtcdClient::Create(eo); e.ok()) {
      etcd::GetOptions ro;
      ro.prefix = true;
      if (auto r = (*e)->Get(keys::Job(job), ro); r.ok()) {
        std::printf("KEYS at revision %lld:\n", static_cast<long long>(r->revision));
        for (const auto& kv : r->kvs) {
          std::printf("  %s create=%lld mod=%lld lease=%lld\n", kv.key.c_str(),
                      static_cast<long long>(kv.create_revision), static_cast<long long>(kv.mod_revision),
                      static_cast<long long>(kv.lease));
        }
      }
    }
    return fail("wait", s);
  }
  if (Status s = c.Initialize(); !s.ok()) return fail("initialize", s);
  std::printf("JOINED %s AT %lld\n", c.trainer_id().c_str(), static_cast<long long>(c.step()));
  std::fflush(stdout);
  if (Status s = c.Pull().Wait(); !s.ok()) return fail("pull", s);
  const int64_t me = std::stoll(c.trainer_id());
  int64_t max_lead = 0;
  std::vector<float> g(dim);
  for (int i = 0; i < steps; ++i) {
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    std::fill(g.begin(), g.end(), 0.0f);
    int64_t step = c.step();
    testing::AddBatchGradient(step, me, batch, w, &g);
    Handle h;
    Status s;
    if (pieces) {
      // Blocks in reverse (trainer 0, as backward would), in order (1), or odd then even (2).
      const int64_t bs = c.block_size(), blocks = (dim + bs - 1) / bs;
      std::vector<int64_t> order;
      for (int64_t b = 0; b < blocks; ++b) order.push_back(me % 3 == 0 ? blocks - 1 - b : b);
      if (me % 3 == 2)
        std::stable_partition(order.begin(), order.end(), [](int64_t b) { return b % 2 == 1; });
      std::vector<Handle> handles;
      for (size_t k = 0; k < order.size(); ++k) {
        const int64_t at = order[k] * bs, n = std::min<int64_t>(bs, dim - at);
        Gradients piece;
        piece.DenseRange("w", at, std::span<const float>(g.data() + at, static_cast<size_t>(n)));
        piece.samples = batch;
        handles.push_back(c.PushPiece(piece, k + 1 == order.size(), /*pull=*/true));
      }
      for (const Handle& x : handles) {
        Status one = x.Wait();
        if (s.ok() && !one.ok()) s = one;
      }
      h = handles.back();
    } else {
      Gradients grads;
      grads.Dense("w", g);
      grads.samples = batch;
      if (wait_here) {
        h = c.PushPullAndWait(grads);
        if (!h.done())
          return fail("push-pull", Status::Internal("PushPullAndWait returned before it was done"));
      } else {
        h = c.PushPull(grads);
      }
      s = h.Wait();
    }
    if (s.code() == StatusCode::kAborted) {
      std::printf("SKIPPED step %lld: %s\n", static_cast<long long>(step), s.message().c_str());
      if (Status p = c.Pull().Wait(); !p.ok()) return fail("pull", p);
      continue;
    }
    if (!s.ok()) return fail("push-pull", s);
    int64_t lead = (step + 1) - h.min_clock();
    max_lead = std::max(max_lead, lead);
    if (report_leads) {
      std::printf("STEP %lld LEAD %lld\n", static_cast<long long>(step), static_cast<long long>(lead));
      std::fflush(stdout);
    }
  }
  std::printf("FINAL_LOSS %.9g\nMAX_LEAD %lld\n", testing::EvalLoss(w), static_cast<long long>(max_lead));
  if (!out.empty()) {
    std::ofstream f(out);
    char buf[32];
    for (float v : w) {
      std::snprintf(buf, sizeof buf, "%.9g\n", v);
      f << buf;
    }
  }
  // Stay registered until every trainer got past its start barrier: a fast trainer that left
  // early (easy in async mode) would leave a slow one waiting for `trainers` registrations
  // that can no longer happen. Each marks itself done; all leave once all are done.
  {
    etcd::EtcdOptions eo;
    eo.endpoints = {etcd};
    auto e = etcd::EtcdClient::Create(eo);
    if (!e.ok()) return fail("etcd", e.status());
    const std::string prefix = keys::Job(job) + "test-done/";
    if (Status s = (*e)->Put(prefix + c.trainer_id(), "1").status(); !s.ok()) return fail("done", s);
    etcd::GetOptions go;
    go.prefix = true;
    go.count_only = true;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (true) {
      auto r = (*e)->Get(prefix, go);
      if (r.ok() && r->count >= trainers) break;
      if (std::chrono::steady_clock::now() > deadline)
        return fail("done", Status::DeadlineExceeded("others not done"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (Status s = c.Close(); !s.ok()) return fail("close", s);
  std::printf("DONE\n");
  std::fflush(stdout);
  return 0;
}
