// A step applies on every pserver or on none: in a sync job with two pservers and two trainers,
// a gradient holding NaN at a random step is dropped before it is sent (policy skip: the push says
// so; policy error: the trainer is told), every pserver closes that step without it, and a push
// that bypasses the trainer's check is refused by the pserver that holds the NaN while the other
// applies its part: whatever happens, both end at the same version, the job goes on and no NaN
// reaches the model.
// (ClientOptions::allow_nonfinite sends NaN on purpose and is not tested here.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "common/files.h"
#include "job/placement.h"
#include "ps/ps_fixture.h"

namespace tessera::testing {
namespace {

class NonFiniteTest : public PsTest {
 protected:
  static constexpr int kDim = 256;  // 4 blocks of 64: two on each pserver
  static constexpr int kSteps = 30;

  struct Outcome {
    std::vector<Status> statuses;  // trainer 1's push results, by step
    std::vector<bool> skipped;
    std::vector<float> w;  // trainer 0's copy of the model at the end
  };

  // Two trainers train for kSteps; trainer 1's gradient holds a NaN at `bad_step`, at `element`
  // (and at every step from it on with `from_then_on`). `pieces`: every push in pieces of one
  // block each, the last block first (Client::PushPiece). `waiting`: every push through
  // PushPullAndWait (with one pserver, it leaves the scan to the pserver).
  Outcome Train(const std::string& job, int bad_step, int element, bool pieces = false, bool waiting = false,
                bool from_then_on = false) {
    Outcome out;
    out.statuses.resize(kSteps);
    out.skipped.resize(kSteps);
    auto trainer = [&](int id) {
      auto c = Client::Connect(ClientFor(job, std::to_string(id)));
      ASSERT_TRUE(c.ok()) << c.status();
      std::vector<float> w(kDim, 0.5f);
      ASSERT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
      ASSERT_TRUE((*c)->Initialize().ok());
      for (int s = 0; s < kSteps; ++s) {
        std::vector<float> g(kDim);
        for (int j = 0; j < kDim; ++j) g[j] = 0.01f * static_cast<float>((j % 7) - 3) + 0.001f * id;
        if (id == 1 && (s == bad_step || (from_then_on && s > bad_step))) g[element] = std::nanf("");
        Status st;
        bool skipped = false;
        if (pieces) {
          std::vector<Handle> hs;
          for (int b = kDim / 64 - 1; b >= 0; --b) {
            Gradients piece;
            piece.DenseRange("w", b * 64, std::span<const float>(g.data() + b * 64, 64));
            piece.samples = 2;
            hs.push_back((*c)->PushPiece(piece, b == 0, /*pull=*/true));
          }
          for (const Handle& h : hs) {
            Status one = h.Wait();
            if (st.ok() && !one.ok()) st = one;
            skipped = skipped || h.skipped();
          }
        } else {
          Gradients grads;
          grads.Dense("w", g);
          grads.samples = 2;
          Handle h = waiting ? (*c)->PushPullAndWait(grads) : (*c)->PushPull(grads);
          st = h.Wait();
          skipped = h.skipped();
        }
        if (id == 1) {
          out.statuses[s] = st;
          out.skipped[s] = skipped;
        } else {
          ASSERT_TRUE(st.ok()) << "trainer 0 step " << s << ": " << st;
        }
      }
      if (id == 0) out.w = w;
      EXPECT_TRUE((*c)->Close().ok());
    };
    std::thread t1(trainer, 1);
    trainer(0);
    t1.join();
    return out;
  }

  // Trainer 1's pushes all went through, the one at `bad` dropped.
  static void ExpectSkippedAt(const Outcome& out, int bad) {
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_TRUE(out.statuses[s].ok()) << "step " << s << ": " << out.statuses[s];
      EXPECT_EQ(out.skipped[s], s == bad) << "step " << s;
    }
  }

  // Policy error: trainer 1's push at `bad` failed, saying `where` and that the step went on.
  static void ExpectErrorAt(const Outcome& out, int bad, const std::string& where) {
    for (int s = 0; s < kSteps; ++s) {
      if (s != bad) {
        EXPECT_TRUE(out.statuses[s].ok()) << "step " << s << ": " << out.statuses[s];
        continue;
      }
      EXPECT_EQ(out.statuses[s].code(), StatusCode::kInvalidArgument);
      EXPECT_NE(out.statuses[s].message().find(where), std::string::npos) << out.statuses[s];
      EXPECT_NE(out.statuses[s].message().find("the step went on without this trainer's gradient"),
                std::string::npos);
    }
  }

  void ExpectTogether(const std::string& job, const JobConfig& cfg, const Outcome& out, int64_t skipped,
                      int64_t refused_on_0) {
    if (cfg.pservers == 1) {
      auto a = PserverStatus(job, cfg.token, 0);
      EXPECT_EQ(a.version(), kSteps);
      EXPECT_EQ(a.skipped(), skipped);
      EXPECT_EQ(a.refused(), refused_on_0);
      ASSERT_EQ(out.w.size(), static_cast<size_t>(kDim));
      for (int j = 0; j < kDim; ++j) ASSERT_TRUE(std::isfinite(out.w[j])) << "w[" << j << "] = " << out.w[j];
      return;
    }
    auto a = PserverStatus(job, cfg.token, 0), b = PserverStatus(job, cfg.token, 1);
    EXPECT_EQ(a.version(), kSteps) << "pserver 0";
    EXPECT_EQ(b.version(), kSteps) << "pserver 1";
    EXPECT_EQ(a.skipped(), skipped);
    EXPECT_EQ(b.skipped(), skipped);
    EXPECT_EQ(a.refused(), refused_on_0);
    EXPECT_EQ(b.refused(), 0);
    ASSERT_EQ(out.w.size(), static_cast<size_t>(kDim));
    for (int j = 0; j < kDim; ++j) ASSERT_TRUE(std::isfinite(out.w[j])) << "w[" << j << "] = " << out.w[j];
  }

  // A sync job on two pservers (or `pservers`), with them running.
  JobConfig StartJob(const std::string& job, int min_trainers,
                     NonFinitePolicy policy = NonFinitePolicy::kSkip, int pservers = 2) {
    auto cfg = MakeJob(job, pservers, "sync", "sgd:lr=0.1", 64, min_trainers, policy);
    for (int p = 0; p < pservers; ++p) StartPserver(job);
    EXPECT_TRUE(WaitForPservers(job, pservers));
    return cfg;
  }

  // Whether pserver 0's log says its own scan found the NaN at `where`, named within the
  // parameter as the trainer's scan names it (one wording, NonFiniteGradient).
  bool PserverFoundIt(const std::string& where) {
    auto log = ReadFile(dir_ + "/pserver0.log");
    return log.ok() && log->find(where + " is not finite (NaN or infinity) (found by this pserver's scan)") !=
                           std::string::npos;
  }

  int RandomStep() {
    std::random_device rd;
    int step = static_cast<int>(rd() % (kSteps - 2)) + 1;
    std::printf("the NaN goes into step %d\n", step);
    return step;
  }
};

TEST_F(NonFiniteTest, ANanAtARandomStepIsDroppedOnEveryPserverAndTheJobGoesOn) {
  const std::string job = "nan-skip";
  auto cfg = StartJob(job, 2);
  const int bad = RandomStep();
  auto out = Train(job, bad, 100);
  ExpectSkippedAt(out, bad);
  ExpectTogether(job, cfg, out, /*skipped=*/1, /*refused_on_0=*/0);
  // Counted where an operator looks: each pserver's /metrics.
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(PserverMetric(job, p, "tessera_pserver_skipped_pushes_total"), 1) << "pserver " << p;
    EXPECT_EQ(PserverMetric(job, p, "tessera_pserver_refused_pushes_total"), 0) << "pserver " << p;
  }
}

// The same with pushes in pieces: the piece holding the NaN (block 1, after blocks 3 and 2 went)
// is sent as a skipped last piece to both pservers, the rest of the step's pieces are not sent,
// and both close the step.
TEST_F(NonFiniteTest, ANanInAPieceEndsThePushOnEveryPserverAndTheJobGoesOn) {
  const std::string job = "nan-pieces";
  auto cfg = StartJob(job, 2);
  const int bad = RandomStep();
  auto out = Train(job, bad, 100, /*pieces=*/true);
  ExpectSkippedAt(out, bad);
  ExpectTogether(job, cfg, out, /*skipped=*/1, /*refused_on_0=*/0);
}

TEST_F(NonFiniteTest, WithThePolicyErrorTheTrainerIsToldAndThePserversStayTogether) {
  const std::string job = "nan-error";
  auto cfg = StartJob(job, 2, NonFinitePolicy::kError);
  const int bad = RandomStep();
  auto out = Train(job, bad, 200);
  ExpectErrorAt(out, bad, "gradient for 'w' element 200 is not finite");
  ExpectTogether(job, cfg, out, /*skipped=*/1, /*refused_on_0=*/0);
}

// With one pserver, a waiting push leaves the scan to it: the NaN is found there, taken as the
// trainer's dropped gradient (not refused), and the trainer hears the same as if it had found it.
TEST_F(NonFiniteTest, WithOnePserverItFindsTheNanAndTheStepGoesOnWithoutIt) {
  const std::string job = "nan-one";
  auto cfg = StartJob(job, 2, NonFinitePolicy::kSkip, /*pservers=*/1);
  const int bad = RandomStep();
  auto out = Train(job, bad, 100, /*pieces=*/false, /*waiting=*/true);
  ExpectSkippedAt(out, bad);
  ExpectTogether(job, cfg, out, /*skipped=*/1, /*refused_on_0=*/0);
  EXPECT_TRUE(PserverFoundIt("gradient for 'w' element 100"));
  EXPECT_EQ(PserverMetric(job, 0, "tessera_pserver_skipped_pushes_total"), 1);
  EXPECT_EQ(PserverMetric(job, 0, "tessera_pserver_refused_pushes_total"), 0);
}

TEST_F(NonFiniteTest, WithOnePserverAndThePolicyErrorTheTrainerIsToldWhereInTheParameter) {
  const std::string job = "nan-one-error";
  auto cfg = StartJob(job, 2, NonFinitePolicy::kError, /*pservers=*/1);
  const int bad = RandomStep();
  auto out = Train(job, bad, 200, /*pieces=*/false, /*waiting=*/true);
  ExpectErrorAt(out, bad, "gradient for 'w' element 200 is not finite");
  ExpectTogether(job, cfg, out, /*skipped=*/1, /*refused_on_0=*/0);
  EXPECT_TRUE(PserverFoundIt("gradient for 'w' element 200"));
}

// Steps the pserver takes as dropped count toward the trainer's "too many in a row" as its own
// finds do: the tenth in a row is an error (the policy skip's limit, ClientLimits).
TEST_F(NonFiniteTest, WithOnePserverDroppedStepsInARowStillEndInAnError) {
  const std::string job = "nan-one-streak";
  auto cfg = StartJob(job, 2, NonFinitePolicy::kSkip, /*pservers=*/1);
  const int first = 5;
  auto out = Train(job, first, 100, /*pieces=*/false, /*waiting=*/true, /*from_then_on=*/true);
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_EQ(out.skipped[s], s >= first) << "step " << s;
    if (s < first + 9) {
      EXPECT_TRUE(out.statuses[s].ok()) << "step " << s << ": " << out.statuses[s];
    } else {
      EXPECT_NE(out.statuses[s].message().find("steps in a row had gradients with NaN or infinity"),
                std::string::npos)
          << "step " << s << ": " << out.statuses[s];
    }
  }
  ExpectTogether(job, cfg, out, /*skipped=*/kSteps - first, /*refused_on_0=*/0);
}

TEST_F(NonFiniteTest, APushRefusedByOnePserverOnlyStillClosesTheStepOnBoth) {
  // One trainer; its push for a step reaches the two pservers as raw requests (a client that
  // skips the checks): pserver 1's part is good, pserver 0's holds a NaN.
  const std::string job = "nan-raw";
  auto cfg = StartJob(job, 1);
  auto c = Client::Connect(ClientFor(job, "0"));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> w(kDim, 0.5f);
  ASSERT_TRUE((*c)->AddDense("w", w.data(), w.size()).ok());
  ASSERT_TRUE((*c)->Initialize().ok());
  auto step = [&] {
    Gradients grads;
    std::vector<float> g(kDim, 0.1f);
    grads.Dense("w", g);
    grads.samples = 1;
    return (*c)->PushPull(grads).Wait();
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(step().ok());
  const int64_t at = (*c)->step();
  auto slots = SlotMap::RoundRobin(cfg.slots, 2);
  auto trainer_epoch = client_->Get(keys::Trainer(job, "0"))->kvs[0].create_revision;
  std::vector<std::string> refused(2);
  for (int p = 0; p < 2; ++p) {
    auto pserver_epoch = client_->Get(keys::Pserver(job, p))->kvs[0].create_revision;
    wire::DataRequest r;
    r.set_op(wire::DataRequest::DATA);
    r.set_job_token(cfg.token);
    r.set_pserver_index(p);
    r.set_pserver_epoch(pserver_epoch);
    r.set_trainer("0");
    r.set_trainer_epoch(trainer_epoch);
    r.set_step(at);
    r.set_is_push(true);
    r.set_samples(1);
    r.set_nonfinite_skips(true);  // ignored with two pservers: pserver 1 may have taken its part
    std::vector<float> payload;
    for (int b = 0; b < kDim / 64; ++b) {
      if (slots.PserverOf(SlotOfBlock("w", b, cfg.slots)) != p) continue;
      auto* seg = r.add_push();
      seg->set_param("w");
      seg->set_block(b);
      seg->set_count(64);
      for (int k = 0; k < 64; ++k) payload.push_back(p == 0 && k == 5 ? std::nanf("") : 0.1f);
    }
    auto conn = RawConnection(job, p);
    ASSERT_NE(conn, nullptr);
    ConstBuffer buf{payload.data(), payload.size() * sizeof(float)};
    auto res = conn->Call(r.SerializeAsString(), {&buf, 1}, {}, std::chrono::seconds(10));
    ASSERT_TRUE(res.ok()) << res.status();
    wire::DataReply reply;
    ASSERT_TRUE(reply.ParseFromArray(res->header.data(), static_cast<int>(res->header.size())));
    refused[p] = reply.message();
  }
  EXPECT_NE(refused[0].find("is not finite"), std::string::npos) << refused[0];
  EXPECT_EQ(refused[1], "") << "pserver 1's part was good";
  auto a = PserverStatus(job, cfg.token, 0), b = PserverStatus(job, cfg.token, 1);
  EXPECT_EQ(a.version(), at + 1) << "pserver 0 closed the step without the refused part";
  EXPECT_EQ(b.version(), at + 1);
  EXPECT_EQ(a.refused(), 1);
  // The job moves on: the trainer's next push realigns to the step both pservers are at.
  Status s = step();
  EXPECT_TRUE(s.ok() || s.code() == StatusCode::kAborted) << s;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(step().ok());
  EXPECT_EQ(PserverStatus(job, cfg.token, 0).version(), PserverStatus(job, cfg.token, 1).version());
  ASSERT_TRUE((*c)->Pull().Wait().ok());
  for (int j = 0; j < kDim; ++j) ASSERT_TRUE(std::isfinite(w[j])) << "w[" << j << "] = " << w[j];
}

}  // namespace
}  // namespace tessera::testing
