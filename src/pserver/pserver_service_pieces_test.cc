// PserverService with sync pushes in pieces, without a network: the bits equal whole pushes'
// (Adam, two trainers, pieces in any order), a block every trainer has sent is applied and its
// pieces' pulls answered before the barrier, while other pulls of it, checkpoints and export cuts
// wait for the barrier; bad pieces are refused and the step still closes. Also consistent
// checkpoints' due snapshots: every one kept in order, and a step that outruns them waits.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "job/wire_convert.h"
#include "pserver/pserver_service.h"
#include "tessera/data.pb.h"

namespace tessera {
namespace {

// A reply that may come after the call returned (a pull waiting for its version).
struct Answer {
  std::atomic<bool> sent{false};  // set by the thread that sends it
  wire::DataReply reply;
  std::vector<float> values;
};

class Keep : public Responder {
 public:
  explicit Keep(std::shared_ptr<Answer> a) : a_(std::move(a)) {}
  MutableBuffer Allocate(size_t bytes) override {
    buf_.resize(bytes);
    return {buf_.data(), bytes};
  }
  void Send(std::string_view header, std::span<const ConstBuffer> payload) override {
    a_->reply.ParseFromArray(header.data(), static_cast<int>(header.size()));
    for (const auto& b : payload) {
      const float* f = static_cast<const float*>(b.data);
      a_->values.insert(a_->values.end(), f, f + b.size / sizeof(float));
    }
    a_->sent = true;
  }

 private:
  std::shared_ptr<Answer> a_;
  std::string buf_;
};

constexpr int kBlocks = 3, kBlock = 4;

// One pserver holding "w" (12 floats in 3 blocks of 4, Adam), sync, trainers "a" and "b".
class Shard {
 public:
  explicit Shard(int backup_trainers = 0, int64_t snapshot_every = 0) {
    PserverServiceOptions o;
    o.snapshot_every = snapshot_every;
    o.job.backup_trainers = backup_trainers;
    o.job.pservers = 1;
    o.job.token = "tok";
    o.job.min_trainers = 2;
    o.job.block_size = kBlock;
    o.job.optimizer = *OptimizerConfig::Parse("adam:lr=0.1");
    o.slots = SlotMap::RoundRobin(o.job.slots, 1);
    o.apply_threads = 1;
    service_ = std::make_unique<PserverService>(o);
  }
  wire::DataRequest Request(wire::DataRequest::Op op, const std::string& trainer) {
    wire::DataRequest r;
    r.set_op(op);
    r.set_job_token("tok");
    r.set_trainer(trainer);
    r.set_trainer_epoch(trainer == "a" ? 11 : 12);
    return r;
  }
  std::shared_ptr<Answer> Call(const wire::DataRequest& r, const std::vector<float>& payload = {}) {
    auto a = std::make_shared<Answer>();
    std::string h = r.SerializeAsString();
    service_->Handle(h, ConstBuffer{payload.data(), payload.size() * sizeof(float)},
                     std::make_unique<Keep>(a));
    return a;
  }
  static wire::Segment Block(int b) {
    wire::Segment s;
    s.set_param("w");
    s.set_block(b);
    s.set_count(kBlock);
    return s;
  }
  void Start() {
    auto init = Request(wire::DataRequest::INIT, "a");
    auto* spec = init.add_params();
    spec->set_name("w");
    spec->set_size(kBlocks * kBlock);
    *spec->mutable_optimizer() = ToWire(*OptimizerConfig::Parse("adam:lr=0.1"));
    std::vector<float> w;
    for (int b = 0; b < kBlocks; ++b) {
      *init.add_push() = Block(b);
      for (int i = 0; i < kBlock; ++i) w.push_back(0.5f * static_cast<float>(b * kBlock + i));
    }
    ASSERT_EQ(Call(init, w)->reply.code(), 0);
    ASSERT_EQ(Call(Request(wire::DataRequest::INIT_DONE, "a"))->reply.code(), 0);
    for (const char* t : {"a", "b"})
      ASSERT_EQ(Call(Request(wire::DataRequest::JOIN, t))->reply.code(), 0) << t;
  }
  // A push (or piece) of `blocks` with gradients g(block) and a pull of the same blocks.
  // Start(), then step 0 pushed whole by both trainers with `g` (the group forms: from step 1
  // blocks may be applied before the barrier).
  void Form(const std::function<std::vector<float>(int)>& g) {
    ASSERT_NO_FATAL_FAILURE(Start());
    auto a = Push("a", 0, {0, 1, 2}, g);  // answered at the barrier, when b has pushed too
    auto b = Push("b", 0, {0, 1, 2}, g);
    for (const auto& r : {a, b}) {
      ASSERT_TRUE(r->sent);
      ASSERT_EQ(r->reply.code(), 0) << r->reply.message();
    }
    ASSERT_EQ(Version(), 1);
  }
  std::shared_ptr<Answer> Push(const std::string& trainer, int64_t step, std::vector<int> blocks,
                               const std::function<std::vector<float>(int)>& g, int piece = 0,
                               bool more = false, int64_t samples = 3) {
    auto r = Request(wire::DataRequest::DATA, trainer);
    r.set_is_push(true);
    r.set_step(step);
    r.set_need(step + 1);
    r.set_samples(samples);
    r.set_piece(piece);
    r.set_more_pieces(more);
    std::vector<float> payload;
    for (int b : blocks) {
      *r.add_push() = Block(b);
      *r.add_pull() = Block(b);
      auto x = g(b);
      payload.insert(payload.end(), x.begin(), x.end());
    }
    return Call(r, payload);
  }
  std::shared_ptr<Answer> Pull(std::vector<int> blocks, int64_t need) {
    auto r = Request(wire::DataRequest::DATA, "a");
    r.set_need(need);
    for (int b : blocks) *r.add_pull() = Block(b);
    return Call(r);
  }
  std::vector<float> Values() {
    auto a = Pull({0, 1, 2}, 0);
    EXPECT_TRUE(a->sent);
    return a->values;
  }
  int64_t Version() { return Call(Request(wire::DataRequest::STATUS, "a"))->reply.version(); }
  PserverService& service() { return *service_; }

 private:
  std::unique_ptr<PserverService> service_;
};

std::vector<float> Grad(const std::string& trainer, int64_t step, int block) {
  std::vector<float> g;
  for (int i = 0; i < kBlock; ++i) {
    g.push_back(std::sin(static_cast<float>(step * 31 + block * 7 + i) + (trainer == "a" ? 0.3f : 1.7f)));
  }
  return g;
}

// Consistent checkpoints (a snapshot due at every version here): every due snapshot is kept and
// taken in order, none replaced by a later one (the pservers of a job must hold the same
// versions), and a barrier that makes one due while another still waits holds the step's
// replies until the checkpoint thread takes the older one.
TEST(PserverSnapshotsTest, EveryDueSnapshotIsKeptInOrderAndAStepWaitsForTheCheckpointThread) {
  Shard s(0, /*snapshot_every=*/1);
  ASSERT_NO_FATAL_FAILURE(s.Start());
  EXPECT_EQ(s.service().due_snapshots(), 1u);  // the initial values (version 0)
  auto g = [](int b) { return Grad("a", 0, b); };
  auto a = s.Push("a", 0, {0, 1, 2}, g);
  EXPECT_FALSE(a->sent);  // held for b
  std::shared_ptr<Answer> b;
  std::thread closing, writer;
  std::atomic<bool> done{false};
  // Whatever fails below, both threads end before the shard goes.
  struct Joined {
    std::thread& closing;
    std::thread& writer;
    std::atomic<bool>& done;
    ~Joined() {
      done = true;
      for (std::thread* t : {&closing, &writer})
        if (t->joinable()) t->join();
    }
  } joined{closing, writer, done};
  closing = std::thread([&] { b = s.Push("b", 0, {0, 1, 2}, g); });
  // b's push closes the step: version 1 is due while version 0 is unwritten, so the step's
  // replies wait.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.service().due_snapshots() < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(s.service().due_snapshots(), 2u);
  EXPECT_FALSE(a->sent);
  auto first = s.service().TakeDueSnapshot();
  closing.join();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->version, 0);
  ASSERT_TRUE(a->sent && b->sent);
  EXPECT_EQ(b->reply.version(), 1);
  // Three more steps while a checkpoint thread takes what is due: every version, in order.
  std::vector<int64_t> taken = {first->version};
  writer = std::thread([&] {
    while (!done || s.service().due_snapshots() > 0) {
      if (auto c = s.service().TakeDueSnapshot()) {
        taken.push_back(c->version);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  });
  for (int64_t step = 1; step <= 3; ++step) {
    auto x = s.Push("a", step, {0, 1, 2}, g);
    ASSERT_EQ(s.Push("b", step, {0, 1, 2}, g)->reply.code(), 0);
    ASSERT_TRUE(x->sent);
  }
  done = true;
  writer.join();
  EXPECT_EQ(taken, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(s.service().TakeDueSnapshot());
}

TEST(PserverPiecesTest, PiecesInAnyOrderGiveTheBitsOfWholePushes) {
  Shard whole, pieces;
  ASSERT_NO_FATAL_FAILURE(whole.Start());
  ASSERT_NO_FATAL_FAILURE(pieces.Start());
  for (int64_t step = 0; step < 6; ++step) {
    auto ga = [&](int b) { return Grad("a", step, b); };
    auto gb = [&](int b) { return Grad("b", step, b); };
    ASSERT_EQ(whole.Push("a", step, {0, 1, 2}, ga)->reply.code(), 0);
    ASSERT_EQ(whole.Push("b", step, {0, 1, 2}, gb)->reply.code(), 0);
    // a: {2} {0} {1, last}; b: {0, 1} {} {2, last}, interleaved (step 0 forms the group: held).
    std::vector<std::shared_ptr<Answer>> answers;
    answers.push_back(pieces.Push("a", step, {2}, ga, 0, true));
    answers.push_back(pieces.Push("b", step, {0, 1}, gb, 0, true));
    answers.push_back(pieces.Push("a", step, {0}, ga, 1, true));
    answers.push_back(pieces.Push("b", step, {}, gb, 1, true));
    answers.push_back(pieces.Push("b", step, {2}, gb, 2, false));
    answers.push_back(pieces.Push("a", step, {1}, ga, 2, false));
    for (const auto& a : answers) {
      ASSERT_TRUE(a->sent) << "step " << step;
      ASSERT_EQ(a->reply.code(), 0) << a->reply.message();
    }
    EXPECT_EQ(pieces.Version(), step + 1);
    const auto w = whole.Values(), p = pieces.Values();
    ASSERT_EQ(w.size(), p.size());
    EXPECT_EQ(std::memcmp(w.data(), p.data(), w.size() * sizeof(float)), 0) << "step " << step;
  }
}

TEST(PserverPiecesTest, ABlockEveryTrainerSentIsAppliedAndAnsweredBeforeTheBarrier) {
  Shard s;
  auto g = [](int) { return std::vector<float>(kBlock, 1.0f); };
  ASSERT_NO_FATAL_FAILURE(s.Form(g));
  const auto before = s.Values();

  // A piece never waits: b has not sent block 0, so a's pull of it is deferred to its last piece.
  auto a0 = s.Push("a", 1, {0}, g, 0, true);
  ASSERT_TRUE(a0->sent);
  EXPECT_EQ(a0->reply.code(), 0);
  EXPECT_TRUE(a0->reply.pull_deferred());
  EXPECT_TRUE(a0->values.empty());
  // b's piece completes block 0: applied now, and b's pull of it answered at the next version.
  auto b0 = s.Push("b", 1, {0}, g, 0, true);
  ASSERT_TRUE(b0->sent);
  EXPECT_FALSE(b0->reply.pull_deferred());
  EXPECT_EQ(b0->reply.version(), 2);
  EXPECT_EQ(s.Version(), 1);  // the step is still open
  ASSERT_EQ(b0->values.size(), static_cast<size_t>(kBlock));
  EXPECT_NE(b0->values[0], before[0]);
  // Another pull of block 0 waits for the barrier; one of block 1 answers at once, unchanged.
  auto late = s.Pull({0}, 1);
  EXPECT_FALSE(late->sent);
  auto other = s.Pull({1}, 1);
  ASSERT_TRUE(other->sent);
  EXPECT_EQ(other->values, std::vector<float>(before.begin() + kBlock, before.begin() + 2 * kBlock));
  // An export cut of the current version has passed; a checkpoint is taken at the barrier.
  auto cut = s.Request(wire::DataRequest::EXPORT_CUT, "export");
  cut.set_export_id(3);
  cut.set_step(1);
  EXPECT_EQ(s.Call(cut)->reply.reason(), wire::DataReply::CUT_PASSED);
  EXPECT_EQ(s.service().SnapshotForCheckpoint("job").status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(s.service().TakeDueSnapshot());

  auto a1 = s.Push("a", 1, {1, 2}, g, 1, false);
  EXPECT_FALSE(a1->sent);  // blocks 1 and 2 wait for b
  EXPECT_EQ(s.Version(), 1);
  auto b1 = s.Push("b", 1, {1, 2}, g, 1, false);
  ASSERT_TRUE(b1->sent && a1->sent);
  EXPECT_EQ(a1->reply.version(), 2);
  EXPECT_EQ(s.Version(), 2);
  ASSERT_TRUE(late->sent);
  EXPECT_EQ(late->reply.version(), 2);
  EXPECT_EQ(late->values, b0->values);
  auto snap = s.service().TakeDueSnapshot();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->version, 2);
  EXPECT_TRUE(s.service().SnapshotForCheckpoint("job").ok());

  // The last piece waits for the barrier even when every block it pulls was applied early: its
  // answer lets the trainer go on to the next step, which this pserver has not opened yet.
  ASSERT_TRUE(s.Push("a", 2, {0, 1, 2}, g, 0, true)->sent);
  ASSERT_TRUE(s.Push("b", 2, {0, 1, 2}, g, 0, true)->sent);  // every block applied
  auto last = s.Request(wire::DataRequest::DATA, "a");
  last.set_is_push(true);
  last.set_step(2);
  last.set_need(3);
  last.set_samples(3);
  last.set_piece(1);
  *last.add_pull() = Shard::Block(0);
  auto a_last = s.Call(last);
  EXPECT_FALSE(a_last->sent);
  ASSERT_TRUE(s.Push("b", 2, {}, g, 1, false)->sent);
  ASSERT_TRUE(a_last->sent);
  EXPECT_EQ(a_last->reply.version(), 3);
  EXPECT_EQ(s.Version(), 3);
}

// A piece standing for a dropped gradient (a NaN the trainer found) ends its push without what
// its earlier pieces held: the step applies as with an empty push in place of the whole.
TEST(PserverPiecesTest, ASkippedPieceDropsTheTrainersEarlierPieces) {
  Shard pieces, whole;
  auto g = [](int b) { return std::vector<float>(kBlock, 0.25f * static_cast<float>(b + 1)); };
  ASSERT_NO_FATAL_FAILURE(pieces.Form(g));
  ASSERT_NO_FATAL_FAILURE(whole.Form(g));
  auto skipped = [](Shard& s, int piece, int64_t samples) {
    auto r = s.Request(wire::DataRequest::DATA, "b");
    r.set_is_push(true);
    r.set_step(1);
    r.set_need(2);
    r.set_piece(piece);
    r.set_samples(samples);
    r.set_skipped("gradient for 'w' element 5 is not finite (NaN or infinity)");
    return s.Call(r);
  };
  ASSERT_TRUE(pieces.Push("b", 1, {1}, g, 0, true)->reply.pull_deferred());
  // The piece says 3 samples; they are not counted (the push stands for a dropped gradient).
  auto drop = skipped(pieces, 1, 3);
  auto drop_whole = skipped(whole, 0, 0);
  for (Shard* s : {&pieces, &whole}) ASSERT_EQ(s->Push("a", 1, {0, 1, 2}, g)->reply.code(), 0);
  ASSERT_TRUE(drop->sent && drop_whole->sent);
  EXPECT_EQ(drop->reply.code(), 0) << drop->reply.message();
  EXPECT_EQ(pieces.Version(), 2);
  const auto p = pieces.Values(), w = whole.Values();
  ASSERT_EQ(p.size(), w.size());
  EXPECT_EQ(std::memcmp(p.data(), w.data(), p.size() * sizeof(float)), 0);
  EXPECT_EQ(pieces.Call(pieces.Request(wire::DataRequest::STATUS, "a"))->reply.skipped(), 1);
}

TEST(PserverPiecesTest, ABadPieceIsRefusedAndTheStepClosesWithoutTheRestOfItsPush) {
  Shard s;
  auto g = [](int) { return std::vector<float>(kBlock, 1.0f); };
  ASSERT_NO_FATAL_FAILURE(s.Form(g));
  auto b0 = s.Push("b", 1, {0}, g, 0, true);
  EXPECT_TRUE(b0->reply.pull_deferred());  // a has not sent block 0
  auto bad = s.Push("b", 1, {1}, g, 1, true, /*samples=*/4);
  ASSERT_TRUE(bad->sent);
  EXPECT_EQ(bad->reply.reason(), wire::DataReply::BAD_REQUEST);
  EXPECT_NE(bad->reply.message().find("sums 4 samples, its earlier pieces 3"), std::string::npos)
      << bad->reply.message();
  auto dup = s.Push("a", 1, {0, 1, 2}, g);
  ASSERT_TRUE(dup->sent);
  EXPECT_EQ(dup->reply.code(), 0) << dup->reply.message();
  EXPECT_EQ(s.Version(), 2);  // b's push counted as refused (empty)
  auto range = s.Push("a", 2, {0}, g, StepPieces::kMaxPieces, true);
  EXPECT_EQ(range->reply.reason(), wire::DataReply::BAD_REQUEST);
}

TEST(PserverPiecesTest, AJobWithBackupTrainersTakesPushesWhole) {
  Shard s(/*backup_trainers=*/1);
  ASSERT_NO_FATAL_FAILURE(s.Start());
  auto g = [](int) { return std::vector<float>(kBlock, 1.0f); };
  auto piece = s.Push("a", 0, {0}, g, 0, true);
  ASSERT_TRUE(piece->sent);
  EXPECT_EQ(piece->reply.reason(), wire::DataReply::BAD_REQUEST);
  EXPECT_NE(
      piece->reply.message().find("not taken by a job with backup trainers; send the step's push whole"),
      std::string::npos)
      << piece->reply.message();
  auto whole = s.Push("b", 0, {0, 1, 2}, g);  // whole pushes go on
  ASSERT_TRUE(whole->sent);
  EXPECT_EQ(whole->reply.code(), 0) << whole->reply.message();
  EXPECT_EQ(s.Version(), 1);
}

}  // namespace
}  // namespace tessera
