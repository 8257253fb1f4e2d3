// PserverService without a network: a request is refused NOT_SERVING whenever the lease is not
// confirmed alive at that moment, and answered again once it is; a sync push refused for its
// content (a NaN, an unknown name) still closes the step, as an empty push; pulls copied after
// the lock, or written by the apply they waited for, never hold values of another version than
// they say.
#include "pserver/pserver_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "job/wire_codec.h"
#include "job/wire_convert.h"
#include "tessera/data.pb.h"

namespace tessera {
namespace {

class Capture : public Responder {
 public:
  explicit Capture(wire::DataReply* out, std::vector<float>* payload = nullptr)
      : out_(out), payload_(payload) {}
  MutableBuffer Allocate(size_t bytes) override {
    buf_.resize(bytes);
    return {buf_.data(), bytes};
  }
  void Send(std::string_view header, std::span<const ConstBuffer> payload) override {
    out_->ParseFromArray(header.data(), static_cast<int>(header.size()));
    if (!payload_) return;
    payload_->clear();
    for (const auto& b : payload) {
      const float* f = static_cast<const float*>(b.data);
      payload_->insert(payload_->end(), f, f + b.size / sizeof(float));
    }
  }

 private:
  wire::DataReply* out_;
  std::vector<float>* payload_;
  std::string buf_;
};

// A reply's payload as bytes (a pull in half precision).
class ByteCapture : public Responder {
 public:
  ByteCapture(wire::DataReply* out, std::string* payload) : out_(out), payload_(payload) {}
  MutableBuffer Allocate(size_t bytes) override {
    buf_.resize(bytes);
    return {buf_.data(), bytes};
  }
  void Send(std::string_view header, std::span<const ConstBuffer> payload) override {
    out_->ParseFromArray(header.data(), static_cast<int>(header.size()));
    payload_->clear();
    for (const auto& b : payload) payload_->append(static_cast<const char*>(b.data), b.size);
  }

 private:
  wire::DataReply* out_;
  std::string* payload_;
  std::string buf_;
};

// A request of job "tok" to pserver 0 (epoch 5) from trainer "a" (epoch 11) or another (12).
wire::DataRequest RequestOf(wire::DataRequest::Op op, const std::string& trainer) {
  wire::DataRequest r;
  r.set_op(op);
  r.set_job_token("tok");
  r.set_pserver_index(0);
  r.set_pserver_epoch(5);
  r.set_trainer(trainer);
  r.set_trainer_epoch(trainer == "a" ? 11 : 12);
  return r;
}

TEST(PserverServiceTest, RefusesEveryRequestWhileItsLeaseIsNotConfirmedAlive) {
  std::atomic<bool> alive{true};
  PserverServiceOptions o;
  o.index = 0;
  o.epoch = 5;
  o.job.pservers = 1;
  o.job.token = "tok";
  o.slots = SlotMap::RoundRobin(o.job.slots, 1);
  o.lease_alive = [&] { return alive.load(); };
  PserverService service(o);
  auto status = [&] {
    wire::DataRequest req;
    req.set_op(wire::DataRequest::STATUS);
    req.set_job_token("tok");
    std::string h = req.SerializeAsString();
    wire::DataReply reply;
    service.Handle(h, ConstBuffer{nullptr, 0}, std::make_unique<Capture>(&reply));
    return reply;
  };
  EXPECT_EQ(status().code(), 0);
  alive = false;
  auto refused = status();
  EXPECT_NE(refused.code(), 0);
  EXPECT_EQ(refused.reason(), wire::DataReply::NOT_SERVING);
  EXPECT_NE(refused.message().find("lease is not confirmed alive"), std::string::npos) << refused.message();
  alive = true;
  EXPECT_EQ(status().code(), 0);
}

// A sync job on one pserver holding "w" (4 floats, SGD lr 1) with two trainers, driven by raw
// requests.
class SyncServiceTest : public ::testing::Test {
 protected:
  SyncServiceTest() {
    PserverServiceOptions o;
    o.index = 0;
    o.epoch = 5;
    o.job.pservers = 1;
    o.job.token = "tok";
    o.job.min_trainers = 2;
    o.job.optimizer = *OptimizerConfig::Parse("sgd:lr=1");
    o.slots = SlotMap::RoundRobin(o.job.slots, 1);
    service_ = std::make_unique<PserverService>(o);
  }

  wire::DataRequest Request(wire::DataRequest::Op op, const std::string& trainer) {
    return RequestOf(op, trainer);
  }
  wire::DataReply Call(const wire::DataRequest& r, const std::vector<float>& payload = {},
                       std::vector<float>* out = nullptr) {
    wire::DataReply reply;
    std::string h = r.SerializeAsString();
    service_->Handle(h, ConstBuffer{payload.data(), payload.size() * sizeof(float)},
                     std::make_unique<Capture>(&reply, out));
    return reply;
  }
  wire::Segment W() {
    wire::Segment s;
    s.set_param("w");
    s.set_block(0);
    s.set_count(4);
    return s;
  }
  void Start() {
    auto init = Request(wire::DataRequest::INIT, "a");
    auto* spec = init.add_params();
    spec->set_name("w");
    spec->set_size(4);
    *spec->mutable_optimizer() = ToWire(*OptimizerConfig::Parse("sgd:lr=1"));
    *init.add_push() = W();
    auto ir = Call(init, {1, 1, 1, 1});
    ASSERT_EQ(ir.code(), 0) << ir.message();
    ASSERT_EQ(Call(Request(wire::DataRequest::INIT_DONE, "a")).code(), 0);
    for (const char* t : {"a", "b"}) {
      auto j = Request(wire::DataRequest::JOIN, t);
      ASSERT_EQ(Call(j).code(), 0) << t;
    }
  }
  wire::DataReply Push(const std::string& trainer, int64_t step, const std::vector<float>& g) {
    auto r = Request(wire::DataRequest::DATA, trainer);
    r.set_is_push(true);
    r.set_step(step);
    r.set_samples(1);
    *r.add_push() = W();
    return Call(r, g);
  }
  std::vector<float> Values() {
    auto r = Request(wire::DataRequest::DATA, "a");
    *r.add_pull() = W();
    std::vector<float> out;
    EXPECT_EQ(Call(r, {}, &out).code(), 0);
    return out;
  }
  wire::DataReply Status() { return Call(Request(wire::DataRequest::STATUS, "a")); }

  std::unique_ptr<PserverService> service_;
};

TEST_F(SyncServiceTest, APushRefusedForItsContentStillClosesTheStepAsAnEmptyPush) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(Push("a", 0, {1, 2, 3, 4}).code(), 0);  // held: trainer b has not pushed
  EXPECT_EQ(Status().version(), 0);
  auto refused = Push("b", 0, {0, std::nanf(""), 0, 0});
  EXPECT_NE(refused.code(), 0);
  EXPECT_EQ(refused.reason(), wire::DataReply::BAD_REQUEST);
  EXPECT_NE(refused.message().find("gradient for 'w' element 1 is not finite"), std::string::npos)
      << refused.message();
  // The step closed with a's gradient alone (1 sample): w = 1 - g.
  auto st = Status();
  EXPECT_EQ(st.version(), 1);
  EXPECT_EQ(st.refused(), 1);
  EXPECT_EQ(Values(), (std::vector<float>{0, -1, -2, -3}));
  // Step 1 goes on as usual for both, and b's content errors of any kind count the same way.
  auto r = Request(wire::DataRequest::DATA, "b");
  r.set_is_push(true);
  r.set_step(1);
  r.set_samples(1);
  auto bad = W();
  bad.set_param("nope");
  *r.add_push() = bad;
  EXPECT_NE(Call(r, {0, 0, 0, 0}).message().find("unknown parameter 'nope'"), std::string::npos);
  ASSERT_EQ(Push("a", 1, {1, 1, 1, 1}).code(), 0);
  EXPECT_EQ(Status().version(), 2);
  EXPECT_EQ(Status().refused(), 2);
}

// Pushes that pull with them: trainer a's pull waits for the step (its reply made at its push),
// b's push closes the step and its pull is answered at once. Both replies are written by the
// step's apply and must hold its values, as a pull after it does; twice, so the second step's
// replies cannot be the first's values.
TEST_F(SyncServiceTest, PullsSentWithTheStepsPushesGetTheValuesTheStepMade) {
  ASSERT_NO_FATAL_FAILURE(Start());
  for (int64_t step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    wire::DataReply ra, rb;
    std::vector<float> va, vb;
    auto push_pull = [&](const std::string& trainer, const std::vector<float>& g, wire::DataReply* reply,
                         std::vector<float>* out) {
      auto r = Request(wire::DataRequest::DATA, trainer);
      r.set_is_push(true);
      r.set_step(step);
      r.set_samples(1);
      r.set_need(step + 1);
      *r.add_push() = W();
      *r.add_pull() = W();
      std::string h = r.SerializeAsString();
      service_->Handle(h, ConstBuffer{g.data(), g.size() * sizeof(float)},
                       std::make_unique<Capture>(reply, out));
    };
    push_pull("a", {1, 2, 3, 4}, &ra, &va);
    EXPECT_TRUE(va.empty()) << "a's pull must wait for b's push";
    push_pull("b", {3, 2, 1, 0}, &rb, &vb);
    // SGD, lr 1, 2 samples: w -= (g_a + g_b) / 2 = 2 a step, from 1.
    const float w = 1.0f - 2.0f * static_cast<float>(step + 1);
    const std::vector<float> expected(4, w);
    ASSERT_EQ(Values(), expected);
    EXPECT_EQ(ra.code(), 0) << ra.message();
    EXPECT_EQ(rb.code(), 0) << rb.message();
    EXPECT_EQ(ra.version(), step + 1);
    EXPECT_EQ(rb.version(), step + 1);
    EXPECT_EQ(va, expected);
    EXPECT_EQ(vb, expected);
  }
}

TEST_F(SyncServiceTest, AnEmptyPushStandingForADroppedGradientIsCountedAndClosesTheStep) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(Push("a", 0, {1, 1, 1, 1}).code(), 0);
  auto skip = Request(wire::DataRequest::DATA, "b");
  skip.set_is_push(true);
  skip.set_step(0);
  skip.set_skipped("gradient for 'w' element 1 is not finite");
  EXPECT_EQ(Call(skip).code(), 0);
  auto st = Status();
  EXPECT_EQ(st.version(), 1);
  EXPECT_EQ(st.skipped(), 1);
  EXPECT_EQ(st.refused(), 0);
  EXPECT_EQ(Values(), (std::vector<float>{0, 0, 0, 0}));
}

// A trainer that left the scan to its only pserver (nonfinite_skips): a NaN in its push is its
// dropped gradient, not a refusal. The step closes without it (counted as skipped), the pull that
// came with it is answered with the step's values, and the reply says where the NaN was. The
// same push without the flag is refused, as before.
TEST_F(SyncServiceTest, ANanInAPushThatLeftTheScanHereIsTheTrainersDroppedGradient) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(Push("a", 0, {1, 1, 1, 1}).code(), 0);
  auto r = Request(wire::DataRequest::DATA, "b");
  r.set_is_push(true);
  r.set_step(0);
  r.set_samples(1);
  r.set_need(1);
  r.set_nonfinite_skips(true);
  *r.add_push() = W();
  *r.add_pull() = W();
  std::vector<float> pulled;
  auto reply = Call(r, {0, 0, std::nanf(""), 0}, &pulled);
  EXPECT_EQ(reply.code(), 0) << reply.message();
  EXPECT_EQ(reply.dropped(), "gradient for 'w' element 2 is not finite (NaN or infinity)");
  EXPECT_EQ(reply.version(), 1);
  // a's gradient alone, over a's 1 sample: w = 1 - 1.
  EXPECT_EQ(pulled, (std::vector<float>{0, 0, 0, 0}));
  auto st = Status();
  EXPECT_EQ(st.version(), 1);
  EXPECT_EQ(st.skipped(), 1);
  EXPECT_EQ(st.refused(), 0);
  // A finite push with the flag is an ordinary one, and its reply says nothing dropped.
  ASSERT_EQ(Push("a", 1, {1, 1, 1, 1}).code(), 0);
  r.set_step(1);
  r.set_need(2);
  reply = Call(r, {3, 3, 3, 3}, &pulled);
  EXPECT_EQ(reply.code(), 0) << reply.message();
  EXPECT_EQ(reply.dropped(), "");
  EXPECT_EQ(pulled, (std::vector<float>{-2, -2, -2, -2}));
  // Without the flag, the pserver refuses it (the trainer said it scanned).
  ASSERT_EQ(Push("a", 2, {1, 1, 1, 1}).code(), 0);
  r.set_step(2);
  r.set_need(0);
  r.set_nonfinite_skips(false);
  reply = Call(r, {0, std::nanf(""), 0, 0});
  EXPECT_EQ(reply.reason(), wire::DataReply::BAD_REQUEST);
  EXPECT_EQ(reply.dropped(), "");
  st = Status();
  EXPECT_EQ(st.version(), 3);
  EXPECT_EQ(st.skipped(), 1);
  EXPECT_EQ(st.refused(), 1);
}

TEST_F(SyncServiceTest, AnExportCutAskedForALaterVersionIsTakenAtItsBarrierAndDoesNotMoveAfter) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto cut = [&](wire::DataRequest::Op op, uint64_t id, int64_t step = 0) {
    auto r = Request(op, "export");
    r.set_export_id(id);
    r.set_step(step);
    return r;
  };
  auto ask = Call(cut(wire::DataRequest::EXPORT_CUT, 5, 1));
  ASSERT_EQ(ask.code(), 0) << ask.message();
  EXPECT_FALSE(ask.export_ready());
  ASSERT_EQ(Push("a", 0, {2, 2, 2, 2}).code(), 0);
  EXPECT_FALSE(Call(cut(wire::DataRequest::EXPORT_CUT, 5, 1)).export_ready());  // b has not pushed
  ASSERT_EQ(Push("b", 0, {0, 2, 4, 6}).code(), 0);                              // barrier: version 1
  const std::vector<float> at1 = Values();
  ASSERT_EQ(at1, (std::vector<float>{0, -1, -2, -3}));
  auto ready = Call(cut(wire::DataRequest::EXPORT_CUT, 5, 1));
  EXPECT_TRUE(ready.export_ready());
  EXPECT_EQ(ready.version(), 1);
  ASSERT_EQ(Push("a", 1, {1, 1, 1, 1}).code(), 0);
  ASSERT_EQ(Push("b", 1, {1, 1, 1, 1}).code(), 0);  // version 2: the shard moved on
  EXPECT_NE(Values(), at1);
  auto read = cut(wire::DataRequest::EXPORT_READ, 5);
  *read.add_pull() = W();
  std::vector<float> got;
  auto rr = Call(read, {}, &got);
  ASSERT_EQ(rr.code(), 0) << rr.message();
  EXPECT_EQ(rr.version(), 1);
  EXPECT_EQ(got, at1);

  // Past versions, unknown cuts and bad reads are refused, saying why.
  auto passed = Call(cut(wire::DataRequest::EXPORT_CUT, 6, 1));
  EXPECT_EQ(passed.reason(), wire::DataReply::CUT_PASSED);
  EXPECT_NE(passed.message().find("at version 2, past the version 1"), std::string::npos) << passed.message();
  auto unknown = cut(wire::DataRequest::EXPORT_READ, 9);
  *unknown.add_pull() = W();
  EXPECT_EQ(Call(unknown).reason(), wire::DataReply::CUT_UNKNOWN);
  auto bad = cut(wire::DataRequest::EXPORT_READ, 5);
  *bad.add_pull() = W();
  bad.mutable_pull(0)->set_block(3);
  auto br = Call(bad);
  EXPECT_EQ(br.reason(), wire::DataReply::BAD_REQUEST);
  EXPECT_NE(br.message().find("block 3 of 'w' is not held by pserver 0"), std::string::npos) << br.message();
  EXPECT_EQ(Call(cut(wire::DataRequest::EXPORT_CUT, 0, 1)).reason(), wire::DataReply::BAD_REQUEST);
  EXPECT_EQ(Call(cut(wire::DataRequest::EXPORT_CUT, 7, -2)).reason(), wire::DataReply::BAD_REQUEST);
  // Released: gone.
  EXPECT_EQ(Call(cut(wire::DataRequest::EXPORT_RELEASE, 5)).code(), 0);
  EXPECT_EQ(Call(read).reason(), wire::DataReply::CUT_UNKNOWN);
  // Now (-1) is taken at once.
  auto now = Call(cut(wire::DataRequest::EXPORT_CUT, 8, -1));
  EXPECT_TRUE(now.export_ready());
  EXPECT_EQ(now.version(), 2);
}

// Pulls copy the dense blocks after the service's lock (deferred_copies.h) while another thread's
// async pushes change them: every pull must hold exactly the values of the version it names
// (each push adds 1 to every element, from 0).
TEST(AsyncServiceTest, PullsCopiedAfterTheLockHoldTheValuesOfTheVersionTheyName) {
  constexpr int kBlocks = 4;
  constexpr int64_t kBlock = 1 << 16;
  PserverServiceOptions o;
  o.index = 0;
  o.epoch = 5;
  o.job.pservers = 1;
  o.job.token = "tok";
  o.job.mode.kind = ConsistencyMode::Kind::kAsync;
  o.job.optimizer = *OptimizerConfig::Parse("sgd:lr=1");
  o.slots = SlotMap::RoundRobin(o.job.slots, 1);
  PserverService service(o);
  auto request = RequestOf;
  auto blocks = [](google::protobuf::RepeatedPtrField<wire::Segment>* out) {
    for (int b = 0; b < kBlocks; ++b) {
      auto* s = out->Add();
      s->set_param("w");
      s->set_block(b);
      s->set_count(kBlock);
    }
  };
  auto call = [&](const wire::DataRequest& r, const std::vector<float>& payload, std::vector<float>* out) {
    wire::DataReply reply;
    std::string h = r.SerializeAsString();
    service.Handle(h, ConstBuffer{payload.data(), payload.size() * sizeof(float)},
                   std::make_unique<Capture>(&reply, out));
    return reply;
  };
  auto init = request(wire::DataRequest::INIT, "a");
  auto* spec = init.add_params();
  spec->set_name("w");
  spec->set_size(kBlocks * kBlock);
  *spec->mutable_optimizer() = ToWire(*OptimizerConfig::Parse("sgd:lr=1"));
  blocks(init.mutable_push());
  ASSERT_EQ(call(init, std::vector<float>(kBlocks * kBlock, 0.0f), nullptr).code(), 0);
  ASSERT_EQ(call(request(wire::DataRequest::INIT_DONE, "a"), {}, nullptr).code(), 0);
  for (const char* t : {"a", "b"})
    ASSERT_EQ(call(request(wire::DataRequest::JOIN, t), {}, nullptr).code(), 0);

  constexpr int kPushes = 300;
  // The pusher pulls with every push: its replies are written by the apply itself.
  std::atomic<int> pusher_wrong{0};
  std::thread pusher([&] {
    const std::vector<float> minus_one(kBlocks * kBlock, -1.0f);
    std::vector<float> mine;
    for (int i = 0; i < kPushes; ++i) {
      auto r = request(wire::DataRequest::DATA, "a");
      r.set_is_push(true);
      r.set_step(i);
      r.set_samples(1);
      blocks(r.mutable_push());
      blocks(r.mutable_pull());
      auto reply = call(r, minus_one, &mine);
      EXPECT_EQ(reply.code(), 0) << reply.message();
      if (mine.size() != minus_one.size() || std::any_of(mine.begin(), mine.end(), [&](float v) {
            return v != static_cast<float>(reply.version());
          }))
        ++pusher_wrong;
    }
  });
  int pulls = 0, wrong = 0;
  int64_t last = -1;
  std::vector<float> got;
  while (last < kPushes && pulls < 100000) {
    auto r = request(wire::DataRequest::DATA, "b");
    blocks(r.mutable_pull());
    auto reply = call(r, {}, &got);
    ASSERT_EQ(reply.code(), 0) << reply.message();
    ASSERT_EQ(got.size(), static_cast<size_t>(kBlocks * kBlock));
    ++pulls;
    last = reply.version();
    for (float v : got) {
      if (v != static_cast<float>(reply.version())) {
        ++wrong;
        break;
      }
    }
  }
  pusher.join();
  EXPECT_EQ(last, kPushes);
  EXPECT_EQ(wrong, 0) << "of " << pulls << " pulls";
  EXPECT_EQ(pusher_wrong.load(), 0) << "of " << kPushes << " pushes with pulls";
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A job's wire formats (job/wire_codec.h): a push in bfloat16 and one sparsified (TOP_K) close a
// step as their float32 values would; a pull in bfloat16 comes back narrowed; a TOP_K push whose
// index is past its block, or a float16 push that overflowed, is refused naming the segment and
// counted as the trainer's empty push (nothing of it applied).
TEST_F(SyncServiceTest, PushesInAWireFormatApplyTheirValuesAndPullsComeBackNarrowed) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto push = [&](const std::string& trainer, int64_t step, wire::Segment seg, const std::string& bytes) {
    auto r = Request(wire::DataRequest::DATA, trainer);
    r.set_is_push(true);
    r.set_step(step);
    r.set_samples(1);
    *r.add_push() = seg;
    wire::DataReply reply;
    std::string h = r.SerializeAsString(), unused;
    service_->Handle(h, ConstBuffer{bytes.data(), bytes.size()},
                     std::make_unique<ByteCapture>(&reply, &unused));
    return reply;
  };
  auto half = W();
  half.set_dtype(wire::BFLOAT16);
  std::string a(8, '\0');
  NarrowValues(std::vector<float>{1, 2, 3, 4}, wire::BFLOAT16, a.data());
  ASSERT_EQ(push("a", 0, half, a).code(), 0);
  auto topk = W();
  topk.set_coding(wire::TOP_K);
  topk.set_nonzeros(2);
  const uint32_t idx[2] = {1, 3};
  const float val[2] = {4, 8};
  std::string b(reinterpret_cast<const char*>(idx), sizeof idx);
  b.append(reinterpret_cast<const char*>(val), sizeof val);
  auto rb = push("b", 0, topk, b);
  ASSERT_EQ(rb.code(), 0) << rb.message();
  // SGD, lr 1, 2 samples: w = 1 - (a + b) / 2.
  const std::vector<float> w = {0.5f, -2.0f, -0.5f, -5.0f};
  EXPECT_EQ(Values(), w);
  auto pull = Request(wire::DataRequest::DATA, "a");
  *pull.add_pull() = half;
  wire::DataReply pr;
  std::string h = pull.SerializeAsString(), narrowed;
  service_->Handle(h, ConstBuffer{}, std::make_unique<ByteCapture>(&pr, &narrowed));
  ASSERT_EQ(pr.code(), 0) << pr.message();
  ASSERT_EQ(narrowed.size(), 8u);
  std::vector<float> back(4);
  WidenValues(narrowed.data(), 4, wire::BFLOAT16, back.data());
  EXPECT_EQ(back, w);

  // Step 1: b's TOP_K index 4 is past the 4 elements; a's float16 overflowed to infinity.
  const uint32_t past[2] = {1, 4};
  b.replace(0, sizeof past, reinterpret_cast<const char*>(past), sizeof past);
  auto bad = push("b", 1, topk, b);
  EXPECT_EQ(bad.reason(), wire::DataReply::BAD_REQUEST);
  EXPECT_NE(bad.message().find("'w' block 0: TOP_K index 4 (entry 1) is past the block's 4 elements"),
            std::string::npos)
      << bad.message();
  half.set_dtype(wire::FLOAT16);
  std::string inf(8, '\0');
  NarrowValues(std::vector<float>{0, 1e6f, 0, 0}, wire::FLOAT16, inf.data());
  auto overflow = push("a", 1, half, inf);
  EXPECT_NE(overflow.message().find("gradient for 'w' element 1 is not finite"), std::string::npos)
      << overflow.message();
  EXPECT_EQ(Status().version(), 2);
  EXPECT_EQ(Status().refused(), 2);
  EXPECT_EQ(Values(), w);  // both empty: nothing applied
  // A payload that does not add up to the coded segments is refused before anything is read.
  auto short_payload = push("a", 2, topk, b.substr(0, 12));
  EXPECT_NE(short_payload.message().find("payload has 12 bytes but the header describes 16"),
            std::string::npos)
      << short_payload.message();
}

}  // namespace
}  // namespace tessera
