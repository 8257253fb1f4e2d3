// pserver failures: a pserver killed with SIGKILL is replaced by a new process and the trainer
// goes on (re-resolving and re-initializing it); a pserver whose lease is revoked stops answering
// within a second; SIGTERM stops a pserver cleanly and frees its index at once.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "harness/ports.h"
#include "linear_data.h"
#include "ps/ps_fixture.h"
#include "pserver/optimizer.h"
#include "tessera/data.pb.h"

namespace tessera::testing {
namespace {

// The pid and epoch registered for pserver `index`.
std::pair<int64_t, int64_t> PserverPidEpoch(etcd::EtcdClient* c, const std::string& job, int index) {
  Registry reg(c, keys::PserverPrefix(job));
  auto l = reg.List();
  if (!l.ok()) return {0, 0};
  const Member* m = l->Find(std::to_string(index));
  if (!m) return {0, 0};
  auto j = nlohmann::json::parse(m->value);
  return {j["pid"].get<int64_t>(), m->epoch};
}

// A linear-regression trainer (one dense parameter, SGD) on a sync job with two pservers, for
// the failures below: its steps, and the weights of a run without the failure.
class FailoverTest : public PsTest {
 protected:
  static constexpr int kDim = 200;

  void StartTrainer(const std::string& job) {
    auto c = Client::Connect(ClientFor(job, "0"));
    ASSERT_TRUE(c.ok()) << c.status();
    client_ps_ = std::move(*c);
    w_.resize(kDim);
    for (int j = 0; j < kDim; ++j) w_[j] = InitialWeight(j);
    ASSERT_TRUE(client_ps_->AddDense("w", w_.data(), w_.size()).ok());
    ASSERT_TRUE(client_ps_->Initialize().ok());
    ASSERT_TRUE(client_ps_->Pull().Wait().ok());
  }

  Status Step(int s) {
    std::vector<float> g(kDim, 0.0f);
    AddBatchGradient(s, 0, 5, w_, &g);
    Gradients grads;
    grads.Dense("w", g);
    grads.samples = 5;
    return client_ps_->PushPull(grads).Wait();
  }

  // SGD keeps no state, and a replacement is initialized from the trainer's copy at the step it
  // had reached: the run equals one without the failure.
  void ExpectSameAsWithoutTheFailure(int steps) {
    std::vector<float> ref(kDim);
    for (int j = 0; j < kDim; ++j) ref[j] = InitialWeight(j);
    auto opt = *OptimizerConfig::Parse("sgd:lr=0.2");
    for (int s = 0; s < steps; ++s) {
      std::vector<float> g(kDim, 0.0f);
      AddBatchGradient(s, 0, 5, ref, &g);
      ApplyUpdate(opt, ref.data(), g.data(), 1.0f / 5, kDim, nullptr, nullptr, s + 1);
    }
    for (int j = 0; j < kDim; ++j) ASSERT_NEAR(w_[j], ref[j], 1e-5 * std::max(1.0f, std::abs(ref[j]))) << j;
  }

  std::unique_ptr<Client> client_ps_;
  std::vector<float> w_;
};

TEST_F(FailoverTest, KilledPserverIsReplacedAndTrainingGoesOnUnchanged) {
  const std::string job = "failover";
  MakeJob(job, 2, "sync", "sgd:lr=0.2", 32);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  ASSERT_NO_FATAL_FAILURE(StartTrainer(job));
  for (int s = 0; s < 5; ++s) ASSERT_TRUE(Step(s).ok());

  auto [pid, old_epoch] = PserverPidEpoch(client_.get(), job, 1);
  ASSERT_GT(pid, 0);
  for (auto& p : procs_) {
    if (p->pid() == pid) p->Kill();
  }
  StartPserver(job);  // the replacement claims index 1 once the dead one's lease expires
  for (int s = 5; s < 10; ++s) {
    Status st = Step(s);
    ASSERT_TRUE(st.ok()) << "step " << s << ": " << st;
  }
  auto [new_pid, new_epoch] = PserverPidEpoch(client_.get(), job, 1);
  EXPECT_NE(new_pid, pid);
  EXPECT_GT(new_epoch, old_epoch);
  EXPECT_EQ(client_ps_->step(), 10);
  ExpectSameAsWithoutTheFailure(10);
}

// A pserver that stops answering while its process lives (SIGSTOP: a hung disk, a paused VM) and
// never comes back: its lease expires, a standby `tessera pserver` takes its index, and the
// trainer's call to the frozen one is abandoned the moment the registration changes, so the step
// goes on well within the request timeout (the frozen process is never resumed).
TEST_F(FailoverTest, FrozenPserverIsReplacedByAStandbyAndTheTrainerMovesToIt) {
  const std::string job = "frozen";
  MakeJob(job, 2, "sync", "sgd:lr=0.2", 32);
  StartPserver(job);
  StartPserver(job);
  ASSERT_TRUE(WaitForPservers(job, 2));
  StartPserver(job);  // the standby: waits for an index to free up
  ASSERT_NO_FATAL_FAILURE(StartTrainer(job));
  for (int s = 0; s < 5; ++s) ASSERT_TRUE(Step(s).ok());

  auto [pid, old_epoch] = PserverPidEpoch(client_.get(), job, 1);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGSTOP), 0);
  const auto stopped = std::chrono::steady_clock::now();
  // When the standby's registration appears (watched from here, beside the trainer).
  std::atomic<double> replaced_at{-1};
  std::thread watch([&] {
    WaitUntil([&] { return PserverPidEpoch(client_.get(), job, 1).second > old_epoch; },
              std::chrono::seconds(60), std::chrono::milliseconds(5));
    replaced_at = SecondsSince(stopped);
  });
  Status st = Step(5);  // sent to the frozen pserver: it must move to the standby
  const double moved = SecondsSince(stopped);
  watch.join();
  ASSERT_TRUE(st.ok()) << st;
  std::printf(
      "pserver 1 frozen (TTL 2 s): standby registered after %.2f s, the step went through after %.2f s "
      "(%.2f s after the standby)\n",
      replaced_at.load(), moved, moved - replaced_at.load());
  EXPECT_GT(replaced_at.load(), 0);
  EXPECT_LT(moved, 30.0) << "the call waited for the frozen pserver instead of moving";
  for (int s = 6; s < 10; ++s) ASSERT_TRUE(Step(s).ok()) << "step " << s;
  auto [new_pid, new_epoch] = PserverPidEpoch(client_.get(), job, 1);
  EXPECT_NE(new_pid, pid);
  EXPECT_GT(new_epoch, old_epoch);
  ExpectSameAsWithoutTheFailure(10);
}

// A long-running node keeps retrying through an etcd outage, and says in its log when the outage
// began and when etcd answered again.
TEST_F(FailoverTest, APserverLogsWhenEtcdBecomesUnreachableAndWhenItIsBack) {
  const std::string job = "outage";
  MakeJob(job, 1);
  size_t i = StartPserver(job, /*ttl=*/20);
  ASSERT_TRUE(WaitForPservers(job, 1));
  Subprocess& p = *procs_[i];
  ASSERT_TRUE(server_->Kill().ok());
  EXPECT_TRUE(p.WaitForOutput("etcd is unreachable (" + server_->endpoint(), std::chrono::seconds(20)))
      << p.Output();
  ASSERT_TRUE(server_->Start().ok());
  EXPECT_TRUE(p.WaitForOutput("etcd answers again after", std::chrono::seconds(30))) << p.Output();
  EXPECT_TRUE(p.running()) << "it kept retrying";
}

TEST_F(FailoverTest, PserverBackAtTheSameAddressIsReconnected) {
  const std::string job = "same-address";
  MakeJob(job, 1, "async", "sgd:lr=0.1");
  const int port = FreePort();
  auto start = [&] {
    SpawnOptions o;
    o.argv = {BuildPath("src/tessera"),
              "pserver",
              "--etcd",
              server_->endpoint(),
              "--job",
              job,
              "--lease-ttl",
              "2",
              "--port",
              std::to_string(port)};
    o.log_path = dir_ + "/same" + std::to_string(procs_.size()) + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok());
    procs_.push_back(std::move(*p));
  };
  start();
  ASSERT_TRUE(WaitForPservers(job, 1));
  auto c = Client::Connect(ClientFor(job));
  ASSERT_TRUE(c.ok());
  std::vector<float> w(10, 1.0f);
  ASSERT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
  ASSERT_TRUE((*c)->Initialize().ok());
  ASSERT_TRUE((*c)->Pull().Wait().ok());
  auto [pid, epoch] = PserverPidEpoch(client_.get(), job, 0);
  procs_.back()->Kill();
  start();  // same port: it binds once the old socket is gone, and registers after the TTL
  std::vector<float> g(10, 1.0f);
  Gradients grads;
  grads.Dense("w", g);
  grads.samples = 1;
  Status s = (*c)->PushPull(grads).Wait();
  ASSERT_TRUE(s.ok()) << s;
  auto [new_pid, new_epoch] = PserverPidEpoch(client_.get(), job, 0);
  EXPECT_NE(new_pid, pid);
  EXPECT_GT(new_epoch, epoch);
  auto kv = client_->Get(keys::Pserver(job, 0));
  EXPECT_NE(kv->kvs[0].value.find(":" + std::to_string(port) + "\""), std::string::npos) << kv->kvs[0].value;
  for (float v : w) EXPECT_FLOAT_EQ(v, 0.9f);  // re-initialized from the trainer's 1.0, then one step
}

TEST_F(FailoverTest, PserverWhoseLeaseIsRevokedStopsAnsweringBeforeItsTtl) {
  const std::string job = "revoke";
  auto cfg = MakeJob(job, 1);
  size_t p = StartPserver(job, /*ttl=*/10);
  ASSERT_TRUE(WaitForPservers(job, 1));
  auto kv = client_->Get(keys::Pserver(job, 0));
  ASSERT_TRUE(kv.ok() && !kv->kvs.empty());
  int64_t lease = kv->kvs[0].lease;
  auto conn = RawConnection(job, 0);
  auto status_ok = [&] {
    wire::DataRequest req;
    req.set_op(wire::DataRequest::STATUS);
    req.set_job_token(cfg.token);
    auto r = conn->Call(req.SerializeAsString(), {}, {}, std::chrono::seconds(2));
    if (!r.ok()) return false;
    wire::DataReply reply;
    return reply.ParseFromArray(r->header.data(), static_cast<int>(r->header.size())) && reply.code() == 0;
  };
  ASSERT_TRUE(status_ok());
  ASSERT_TRUE(client_->RevokeLease(lease).ok());
  auto revoked = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      WaitUntil([&] { return !status_ok(); }, std::chrono::seconds(10), std::chrono::milliseconds(20)));
  // It noticed the revocation itself (keep-alives every 500 ms), long before the 10 s TTL could
  // have run out. The typical figure (about 0.5-1 s) is printed, not asserted: timing goals
  // belong to benchmarks, and a loaded machine may stretch it.
  double took = SecondsSince(revoked);
  std::printf("stopped answering %.2f s after the revocation\n", took);
  EXPECT_LT(took, 5.0);
  // It then exits with the "lease lost" code for a supervisor to restart it.
  auto code = procs_[p]->Wait(std::chrono::seconds(15));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 3) << procs_[p]->Output();
}

TEST_F(FailoverTest, SigtermStopsCleanlyAndFreesTheIndexAtOnce) {
  const std::string job = "term";
  MakeJob(job, 1);
  size_t p = StartPserver(job, /*ttl=*/30);
  ASSERT_TRUE(WaitForPservers(job, 1));
  ASSERT_TRUE(procs_[p]->Signal(SIGTERM).ok());
  auto stopped = std::chrono::steady_clock::now();
  auto code = procs_[p]->Wait(std::chrono::seconds(15));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << procs_[p]->Output();
  // Freed by revoking the lease, not by waiting 30 s for it to expire.
  ASSERT_TRUE(WaitForPservers(job, 0, std::chrono::seconds(5)));
  EXPECT_LT(SecondsSince(stopped), 5.0);
  EXPECT_NE(procs_[p]->Output().find("pserver 0 stopped"), std::string::npos) << procs_[p]->Output();
}

TEST_F(FailoverTest, PserverForAMissingJobFailsWithAClearMessage) {
  size_t p = StartPserver("no-such-job");
  auto code = procs_[p]->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(procs_[p]->Output().find("job 'no-such-job' does not exist"), std::string::npos)
      << procs_[p]->Output();
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// Fencing: a pserver frozen (SIGSTOP) past its lease TTL answers nothing once it runs again,
// not even before its lease keeper has caught up, and then exits with the "lease lost" code.
TEST_F(PsTest, PserverStalledPastItsLeaseAnswersNothingAfterItResumes) {
  const std::string job = "stall";
  auto cfg = MakeJob(job, 1);
  size_t p = StartPserver(job, /*ttl=*/2);
  ASSERT_TRUE(WaitForPservers(job, 1));
  auto kv = client_->Get(keys::Pserver(job, 0));
  ASSERT_TRUE(kv.ok() && !kv->kvs.empty());
  auto conn = RawConnection(job, 0);
  int answered = 0, asked = 0;
  auto ask = [&] {
    wire::DataRequest req;
    req.set_op(wire::DataRequest::STATUS);
    req.set_job_token(cfg.token);
    ++asked;
    auto r = conn->Call(req.SerializeAsString(), {}, {}, std::chrono::seconds(2));
    wire::DataReply reply;
    bool ok = r.ok() && reply.ParseFromArray(r->header.data(), static_cast<int>(r->header.size())) &&
              reply.code() == 0;
    answered += ok;
    return ok;
  };
  ASSERT_TRUE(ask());
  answered = asked = 0;
  pid_t pid = procs_[p]->pid();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  // Past the TTL etcd drops the lease and the key.
  ASSERT_TRUE(
      WaitUntil([&] { return client_->Get(keys::Pserver(job, 0))->kvs.empty(); }, std::chrono::seconds(20)));
  // A request waits in its socket while the process is frozen, and is the first thing it sees.
  std::thread first([&] { ask(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the request reach the socket
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  first.join();
  for (int i = 0; i < 20 && procs_[p]->running(); ++i) ask();
  EXPECT_EQ(answered, 0) << "answered " << answered << " of " << asked << " requests after resuming";
  auto code = procs_[p]->Wait(std::chrono::seconds(15));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 3) << procs_[p]->Output();
}

}  // namespace
}  // namespace tessera::testing
