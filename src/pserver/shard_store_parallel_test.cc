// ShardStore with a pool: a large request's rows shared by several threads give exactly the
// bits one thread gives (values, optimizer state, row numbers, the record of changed rows),
// with repeated keys, new rows and every optimizer; small requests and tables with limits stay
// on one thread; dense updates write their new values into the pull replies that ask for them,
// in the order of a reply in place when its reader watches how far it has got.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "common/reply_progress.h"
#include "job/placement.h"
#include "pserver/shard_store.h"

namespace tessera {
namespace {

JobConfig Job() {
  JobConfig j;
  j.pservers = 1;
  j.slots = 64;
  return j;
}

// The same random requests through a store alone and a store with `pool`: identical snapshots
// and pulls after every request, and the same delta when a checkpoint copy is taken.
void Compare(const std::string& optimizer, int dim, int threads, uint32_t seed) {
  SCOPED_TRACE(optimizer + " dim " + std::to_string(dim) + " threads " + std::to_string(threads) + " seed " +
               std::to_string(seed));
  WorkPool pool(threads);
  ShardStore one(0, Job(), SlotMap::RoundRobin(64, 1));
  ShardStore many(0, Job(), SlotMap::RoundRobin(64, 1));
  many.SetPool(&pool);
  ParamDecl t{
      "emb", true, 0, dim, *OptimizerConfig::Parse(optimizer), *InitializerConfig::Parse("normal:0,0.1")};
  ASSERT_TRUE(one.Declare(t).ok());
  ASSERT_TRUE(many.Declare(t).ok());
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 12; ++round) {
    // 5000-9000 keys (past kParallelRows) from a range that keeps growing: many repeats, some new.
    const size_t n = ShardStore::kParallelRows + 1000 + rng() % 4000;
    const uint64_t range = 3000 + 2000 * round;
    std::vector<uint64_t> keys(n);
    for (auto& k : keys) k = rng() % range * 0x9E3779B97F4A7C15ull;
    std::vector<float> grads(n * dim);
    for (auto& g : grads) g = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 1000.0f;
    if (round % 3 == 2) {
      std::vector<float> a(n * dim), b(n * dim);
      one.ReadSparse("emb", keys, a.data());
      many.ReadSparse("emb", keys, b.data());
      ASSERT_EQ(a, b) << "round " << round;
    } else {
      one.ApplySparse("emb", keys, grads.data(), 0.5f);
      many.ApplySparse("emb", keys, grads.data(), 0.5f);
    }
    ASSERT_EQ(one.Snapshot(), many.Snapshot()) << "round " << round;
    ASSERT_EQ(one.DeltaBytes(), many.DeltaBytes()) << "round " << round;
    if (round == 6) {
      ASSERT_EQ(one.CheckpointSnapshot(false), many.CheckpointSnapshot(false));
    }
  }
  ASSERT_EQ(one.CheckpointSnapshot(true), many.CheckpointSnapshot(true));
}

TEST(ShardStoreParallelTest, SeveralThreadsGiveTheBitsOfOne) {
  for (const char* opt : {"sgd:lr=0.1", "adagrad:lr=0.1", "adam:lr=0.01",
                          "ftrl:alpha=0.1,beta=1,l1=0.01,l2=0.1", "momentum:lr=0.1,momentum=0.9"}) {
    for (int threads : {2, 3}) {
      ASSERT_NO_FATAL_FAILURE(Compare(opt, threads == 2 ? 8 : 5, threads, 7 + threads));
    }
  }
  ASSERT_NO_FATAL_FAILURE(Compare("adagrad:lr=0.1", 64, 4, 99));
}

TEST(ShardStoreParallelTest, OnlyLargeRequestsOfTablesWithoutLimitsAreShared) {
  WorkPool pool(2);
  ShardStore s(0, Job(), SlotMap::RoundRobin(64, 1));
  s.SetPool(&pool);
  ParamDecl plain{"emb", true, 0, 4, *OptimizerConfig::Parse("sgd:lr=1"), {}};
  ParamDecl limited = plain;
  limited.name = "lim";
  limited.limits = *TableLimits::Parse("evict_after=100");
  ASSERT_TRUE(s.Declare(plain).ok());
  ASSERT_TRUE(s.Declare(limited).ok());
  std::vector<uint64_t> keys(ShardStore::kParallelRows);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  std::vector<float> g(keys.size() * 4, 1.0f), out(keys.size() * 4);
  s.ApplySparse("lim", keys, g.data(), 1.0f);
  s.ReadSparse("lim", keys, out.data());
  s.ApplySparse("emb", std::span(keys).first(keys.size() - 1), g.data(), 1.0f);
  EXPECT_EQ(pool.runs(), 0);
  s.ApplySparse("emb", keys, g.data(), 1.0f);  // one shared run (the new row made after it)
  EXPECT_EQ(pool.runs(), 1);
  s.ReadSparse("emb", keys, out.data());
  EXPECT_EQ(pool.runs(), 2);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(out[i * 4], i + 1 < keys.size() ? -2.0f : -1.0f) << i;
}

TEST(ShardStoreParallelTest, TheFirstKeyServedElsewhereIsNamedAsOnOneThread) {
  JobConfig job = Job();
  job.pservers = 2;
  const auto slots = SlotMap::RoundRobin(64, 2);
  WorkPool pool(2);
  ShardStore s(0, job, slots);
  s.SetPool(&pool);
  ShardStore alone(0, job, slots);
  ParamDecl t{"emb", true, 0, 4, *OptimizerConfig::Parse("sgd:lr=1"), {}};
  ASSERT_TRUE(s.Declare(t).ok());
  ASSERT_TRUE(alone.Declare(t).ok());
  std::vector<uint64_t> mine, theirs;
  for (uint64_t k = 0; mine.size() < 2 * ShardStore::kParallelRows || theirs.size() < 2; ++k)
    (slots.PserverOf(SlotOfKey("emb", k, 64)) == 0 ? mine : theirs).push_back(k);
  std::vector<uint64_t> keys = mine;
  EXPECT_TRUE(s.CheckSparse("emb", keys).ok());
  const int64_t before = pool.runs();
  keys[5000] = theirs[1];
  keys[7000] = theirs[0];
  auto shared = s.CheckSparse("emb", keys);
  EXPECT_EQ(pool.runs(), before + 1);
  EXPECT_EQ(shared, alone.CheckSparse("emb", keys));
  EXPECT_NE(shared.message().find("key " + std::to_string(theirs[1]) + " of table 'emb'"), std::string::npos)
      << shared;
}

// An update of every block of `params` (name, size), each with its own gradient in `grads`.
std::vector<ShardStore::DenseUpdate> EveryBlock(const std::vector<std::pair<std::string, int64_t>>& params,
                                                int64_t block_size, std::vector<std::vector<float>>* grads) {
  std::vector<ShardStore::DenseUpdate> updates;
  for (const auto& [name, size] : params) {
    for (int64_t b = 0; b * block_size < size; ++b) {
      grads->emplace_back(std::min<int64_t>(block_size, size - b * block_size));
      updates.push_back({&name, b, nullptr});
    }
  }
  return updates;
}

// Dense updates shared by threads: the same bits as one by one, for every optimizer, blocks of
// several parameters (a short last block too), many steps; a block named twice goes in order.
TEST(ShardStoreParallelTest, DenseUpdatesSharedByThreadsGiveTheBitsOfOneByOne) {
  JobConfig job = Job();
  job.block_size = 40000;
  for (const char* opt : {"sgd:lr=0.1,weight_decay=0.01", "momentum:lr=0.1,momentum=0.9,nesterov=1",
                          "adagrad:lr=0.1", "adam:lr=0.01", "ftrl:alpha=0.1,beta=1,l1=0.01,l2=0.1"}) {
    SCOPED_TRACE(opt);
    WorkPool pool(3);
    ShardStore one(0, job, SlotMap::RoundRobin(64, 1));
    ShardStore many(0, job, SlotMap::RoundRobin(64, 1));
    many.SetPool(&pool);
    const std::vector<std::pair<std::string, int64_t>> params{{"a", 100000}, {"b", 5}, {"c", 40000}};
    for (const auto& [name, size] : params) {
      ParamDecl d{name, false, size, 0, *OptimizerConfig::Parse(opt)};
      ASSERT_TRUE(one.Declare(d).ok());
      ASSERT_TRUE(many.Declare(d).ok());
    }
    std::mt19937 rng(5);
    std::vector<std::vector<float>> grads;
    std::vector<ShardStore::DenseUpdate> updates = EveryBlock(params, job.block_size, &grads);
    const int64_t runs_before = pool.runs();
    for (int step = 0; step < 6; ++step) {
      for (size_t u = 0; u < updates.size(); ++u) {
        for (auto& g : grads[u]) g = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 500.0f;
        updates[u].grad = grads[u].data();
      }
      for (const auto& u : updates) one.ApplyDense(*u.param, u.block, u.grad, 0.25f);
      many.ApplyDenseMany(updates, 0.25f);
      ASSERT_EQ(one.Snapshot(), many.Snapshot()) << "step " << step;
    }
    EXPECT_EQ(pool.runs(), runs_before + 6);
    // The same block twice: applied twice, in order, as one by one would.
    std::vector<ShardStore::DenseUpdate> twice{updates[0], updates[0]};
    one.ApplyDense(*twice[0].param, 0, twice[0].grad, 1.0f);
    one.ApplyDense(*twice[1].param, 0, twice[1].grad, 1.0f);
    many.ApplyDenseMany(twice, 1.0f);
    ASSERT_EQ(one.Snapshot(), many.Snapshot());
  }
}

// A dense update may also write its block's new values into pull replies waiting for them
// (DenseUpdate::copy_to): each place then holds exactly the values the store holds, on one
// thread and on several, a block named twice too, and the store's bits are those of updates
// without copies. Every change to dense values moves the store's dense generation on.
TEST(ShardStoreParallelTest, DenseUpdatesWriteTheirNewValuesWhereAsked) {
  JobConfig job = Job();
  job.block_size = 40000;
  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    WorkPool pool(threads);
    ShardStore plain(0, job, SlotMap::RoundRobin(64, 1));
    ShardStore copying(0, job, SlotMap::RoundRobin(64, 1));
    copying.SetPool(&pool);
    const std::vector<std::pair<std::string, int64_t>> params{{"a", 100000}, {"b", 5}};
    uint64_t generation = copying.dense_generation();
    for (const auto& [name, size] : params) {
      ParamDecl d{name, false, size, 0, *OptimizerConfig::Parse("adam:lr=0.01")};
      ASSERT_TRUE(plain.Declare(d).ok());
      ASSERT_TRUE(copying.Declare(d).ok());
      EXPECT_GT(copying.dense_generation(), generation);
      generation = copying.dense_generation();
    }
    std::mt19937 rng(9);
    std::vector<std::vector<float>> grads;
    std::vector<ShardStore::DenseUpdate> updates = EveryBlock(params, job.block_size, &grads);
    // Two replies per block, filled with a marker the copy must overwrite.
    std::vector<std::vector<float>> first(updates.size()), second(updates.size());
    std::vector<std::vector<float*>> to(updates.size());
    for (int step = 0; step < 4; ++step) {
      for (size_t u = 0; u < updates.size(); ++u) {
        for (auto& g : grads[u]) g = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 500.0f;
        updates[u].grad = grads[u].data();
        first[u].assign(grads[u].size(), -7.0f);
        second[u].assign(grads[u].size(), -7.0f);
        // Every block to one reply; on odd steps the first block to two.
        to[u] = {first[u].data()};
        if (step % 2 == 1 && u == 0) to[u].push_back(second[u].data());
        updates[u].copy_to = to[u].data();
        updates[u].copies = static_cast<int>(to[u].size());
      }
      for (const auto& u : updates) plain.ApplyDense(*u.param, u.block, u.grad, 0.25f);
      copying.ApplyDenseMany(updates, 0.25f);
      ASSERT_EQ(plain.Snapshot(), copying.Snapshot()) << "step " << step;
      EXPECT_GT(copying.dense_generation(), generation);
      generation = copying.dense_generation();
      for (size_t u = 0; u < updates.size(); ++u) {
        const float* values = copying.DenseValues(*updates[u].param, updates[u].block);
        ASSERT_EQ(first[u], std::vector<float>(values, values + first[u].size()))
            << "step " << step << " update " << u;
        if (to[u].size() == 2) {
          ASSERT_EQ(second[u], std::vector<float>(values, values + second[u].size())) << "step " << step;
        }
      }
    }
    // The same block twice: the reply gets the values after both.
    std::vector<float> reply(grads[0].size(), -7.0f);
    float* reply_to[] = {reply.data()};
    std::vector<ShardStore::DenseUpdate> twice{updates[0], updates[0]};
    twice[0].copy_to = twice[1].copy_to = reply_to;
    twice[0].copies = twice[1].copies = 1;
    plain.ApplyDense(*twice[0].param, 0, twice[0].grad, 1.0f);
    plain.ApplyDense(*twice[1].param, 0, twice[1].grad, 1.0f);
    copying.ApplyDenseMany(twice, 1.0f);
    ASSERT_EQ(plain.Snapshot(), copying.Snapshot());
    const float* values = copying.DenseValues("a", 0);
    EXPECT_EQ(reply, std::vector<float>(values, values + reply.size()));
    // Setting values moves the generation on too.
    generation = copying.dense_generation();
    copying.SetDense("b", 0, grads.back().data());
    EXPECT_GT(copying.dense_generation(), generation);
  }
}

// Two stores of the same parameters (Adam, blocks of 40,000) sharing a pool of 2: one updated
// block by block, the other by ApplyDenseMany with replies told as they are written.
struct PlainAndTold {
  explicit PlainAndTold(const std::vector<std::pair<std::string, int64_t>>& params)
      : job(Blocks(40000)),
        plain(0, job, SlotMap::RoundRobin(64, 1)),
        told(0, job, SlotMap::RoundRobin(64, 1)) {
    plain.SetPool(&pool);
    told.SetPool(&pool);
    for (const auto& [name, size] : params) {
      ParamDecl d{name, false, size, 0, *OptimizerConfig::Parse("adam:lr=0.01")};
      EXPECT_TRUE(plain.Declare(d).ok());
      EXPECT_TRUE(told.Declare(d).ok());
    }
  }
  static JobConfig Blocks(int64_t size) {
    JobConfig j = Job();
    j.block_size = size;
    return j;
  }
  JobConfig job;
  WorkPool pool{2};
  ShardStore plain, told;
};

// With a reply written in place whose reader waits on a progress word (common/reply_progress.h),
// the blocks are updated in the order the reply holds them, and after each run the word says how
// much of the reply is written: only ever a prefix that holds its final values, ending at the
// reply's end. The store's bits are those of the pool's way. A block whose values go to two
// replies (the reply's order unknown) stops the word where it is.
TEST(ShardStoreParallelTest, AReplyInPlaceIsWrittenInItsOrderAndSaysHowFarItHasGot) {
  // "b" sorts first, but the reply holds "a"'s blocks first, as a trainer's memory may.
  const std::vector<std::pair<std::string, int64_t>> params{{"b", 5}, {"a", 100000}};
  PlainAndTold stores(params);
  ASSERT_FALSE(HasFailure());
  auto& [job, pool, plain, told] = stores;
  std::vector<std::vector<float>> grads;
  std::vector<ShardStore::DenseUpdate> updates = EveryBlock(params, job.block_size, &grads);
  ASSERT_EQ(updates.size(), 4u);  // b 0, a 0, a 1, a 2
  std::mt19937 rng(4);
  std::vector<float> reply(100005);
  float* at[] = {reply.data() + 100000, reply.data(), reply.data() + 40000, reply.data() + 80000};
  std::atomic<uint64_t> word{0};
  const ReplyProgress room{reinterpret_cast<char*>(reply.data()), reply.size() * sizeof(float), &word};
  const ReplyProgress* told_one[] = {&room};
  // What the word said after each run, and whether the prefix it named was final then.
  struct Seen {
    uint64_t bytes;
    bool final;
  };
  for (int step = 0; step < 3; ++step) {
    for (size_t u = 0; u < updates.size(); ++u) {
      for (auto& g : grads[u]) g = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 500.0f;
      updates[u].grad = grads[u].data();
      updates[u].copy_to = &at[u];
      updates[u].copies = 1;
      updates[u].told = told_one;
    }
    std::fill(reply.begin(), reply.end(), -7.0f);
    word = 0;
    for (const auto& u : updates) plain.ApplyDense(*u.param, u.block, u.grad, 0.5f);
    told.ApplyDenseMany(updates, 0.5f);
    ASSERT_EQ(plain.Snapshot(), told.Snapshot()) << "step " << step;
    EXPECT_EQ(word.load(), reply.size() * sizeof(float)) << "step " << step;
    std::vector<float> want(reply.size());
    for (size_t u = 0; u < updates.size(); ++u) {
      const float* v = told.DenseValues(*updates[u].param, updates[u].block);
      std::copy(v, v + grads[u].size(), want.begin() + (at[u] - reply.data()));
    }
    ASSERT_EQ(reply, want) << "step " << step;
  }
  // The word moves in runs, each a prefix already final: watched from another thread.
  std::vector<Seen> seen;
  std::atomic<bool> done{false};
  word = 0;
  std::fill(reply.begin(), reply.end(), -7.0f);
  std::thread watcher([&] {
    uint64_t last = 0;
    for (int i = 0; i < 100000000 && !done.load(); ++i) {
      const uint64_t b = word.load(std::memory_order_acquire);
      if (b == last) continue;
      bool final = true;
      for (uint64_t f = 0; f < b / sizeof(float); ++f) final = final && reply[f] != -7.0f;
      seen.push_back({b, final});
      last = b;
    }
  });
  told.ApplyDenseMany(updates, 0.5f);
  done = true;
  watcher.join();
  for (const Seen& s : seen) EXPECT_TRUE(s.final) << s.bytes;
  EXPECT_EQ(word.load(), reply.size() * sizeof(float));

  // A block going to a second reply not read as it comes, or to a reply elsewhere: the pool's
  // way, the word left alone, the values all there.
  std::vector<float> other(40000);
  float* two[] = {reply.data() + 40000, other.data()};
  const ReplyProgress* told_first_only[] = {&room, nullptr};
  float* elsewhere[] = {other.data()};
  for (int c : {2, 1}) {
    updates[2].copy_to = c == 2 ? two : elsewhere;
    updates[2].copies = c;
    updates[2].told = c == 2 ? told_first_only : told_one;
    word = 0;
    const int64_t runs = pool.runs();
    told.ApplyDenseMany(updates, 0.5f);
    EXPECT_EQ(word.load(), 0u) << c;
    EXPECT_GT(pool.runs(), runs) << c;
    const float* v = told.DenseValues("a", 1);
    EXPECT_EQ(other, std::vector<float>(v, v + 40000)) << c;
    if (c == 2) {
      EXPECT_TRUE(std::equal(other.begin(), other.end(), reply.begin() + 40000));
    }
  }
}

// A barrier that releases two trainers: the apply writes both replies, and each reply's own word
// says how far it has got, a prefix already final, up to its end; the store's bits are the
// pool's. A second reply that holds the blocks in another order is told up to its first gap only.
TEST(ShardStoreParallelTest, AtABarrierEachReplyInPlaceIsToldHowFarItHasGot) {
  const std::vector<std::pair<std::string, int64_t>> params{{"a", 100000}};
  PlainAndTold stores(params);
  ASSERT_FALSE(HasFailure());
  auto& [job, pool, plain, told] = stores;
  std::vector<std::vector<float>> grads;
  std::vector<ShardStore::DenseUpdate> updates = EveryBlock(params, job.block_size, &grads);
  ASSERT_EQ(updates.size(), 3u);  // a 0, a 1, a 2
  for (bool same_order : {true, false}) {
    std::vector<float> first(100000, -7.0f), second(100000, -7.0f);
    std::atomic<uint64_t> first_word{0}, second_word{0};
    const ReplyProgress rooms[] = {
        {reinterpret_cast<char*>(first.data()), first.size() * sizeof(float), &first_word},
        {reinterpret_cast<char*>(second.data()), second.size() * sizeof(float), &second_word}};
    // Where each block goes in each reply; the second reply's other order puts block 1 first.
    const int64_t in_second[] = {same_order ? 0 : 40000, same_order ? 40000 : 0, 80000};
    std::vector<std::array<float*, 2>> to(updates.size());
    std::vector<std::array<const ReplyProgress*, 2>> by(updates.size());
    std::mt19937 rng(9);
    for (size_t u = 0; u < updates.size(); ++u) {
      for (auto& g : grads[u]) g = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 500.0f;
      to[u] = {first.data() + 40000 * u, second.data() + in_second[u]};
      by[u] = {&rooms[0], &rooms[1]};
      updates[u].grad = grads[u].data();
      updates[u].copy_to = to[u].data();
      updates[u].copies = 2;
      updates[u].told = by[u].data();
    }
    for (const auto& u : updates) plain.ApplyDense(*u.param, u.block, u.grad, 0.5f);
    // Both words watched from another thread: each value they named was final then.
    std::atomic<bool> done{false}, every_told_final{true};
    std::thread watcher([&] {
      for (int i = 0; i < 100000000 && !done.load(); ++i) {
        for (const auto* r : {&first, &second}) {
          const uint64_t b = (r == &first ? first_word : second_word).load(std::memory_order_acquire);
          for (uint64_t f = 0; f < b / sizeof(float); f += 997)
            if ((*r)[f] == -7.0f) every_told_final = false;
        }
      }
    });
    const int64_t runs = pool.runs();
    told.ApplyDenseMany(updates, 0.5f);
    done = true;
    watcher.join();
    ASSERT_EQ(plain.Snapshot(), told.Snapshot()) << same_order;
    EXPECT_TRUE(every_told_final.load()) << same_order;
    EXPECT_EQ(pool.runs(), runs) << "one thread, in the replies' order";
    EXPECT_EQ(first_word.load(), first.size() * sizeof(float)) << same_order;
    // In the other order the second reply's first run is block 1's, at 40,000 elements from its
    // start: not a prefix, so it is not told (the reply is whole once it is sent).
    EXPECT_EQ(second_word.load(), same_order ? second.size() * sizeof(float) : 0u);
    for (size_t u = 0; u < updates.size(); ++u) {
      const float* v = told.DenseValues("a", static_cast<int64_t>(u));
      const size_t n = grads[u].size();
      EXPECT_TRUE(std::equal(v, v + n, first.data() + 40000 * u)) << u;
      EXPECT_TRUE(std::equal(v, v + n, second.data() + in_second[u])) << u;
    }
  }
}

}  // namespace
}  // namespace tessera
