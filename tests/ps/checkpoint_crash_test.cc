// A checkpoint writer killed with SIGKILL at random moments, 50 times in a row: after every kill
// the checkpoint a restarting pserver would load is whole (every value is its version), is the
// newest one recorded or the one before it, and no older than the last one the writer reported.
// Then the same with incremental checkpoints (a base and chains of deltas): every restart
// rebuilds exactly the shard of its version from the base and its deltas.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <random>
#include <set>

#include "checkpoint/checkpointer.h"
#include "checkpoint_writer.h"
#include "ps/ps_fixture.h"

namespace tessera::testing {
namespace {

class CheckpointCrashTest : public PsTest {
 protected:
  struct Killed {
    int64_t reported = 0;              // the newest version the writer said it recorded
    std::optional<Checkpoint> loaded;  // what a restarting pserver loads
  };
  // Runs the writer (with `extra` flags), waits for its first record when `wait_first`, kills it
  // 5 to 150 ms later, and loads what a restarting pserver of the job would.
  Killed RunAndKill(const std::string& job, const std::string& dir, int run, std::mt19937& rng,
                    bool wait_first, std::vector<std::string> extra = {}) {
    Killed k;
    SpawnOptions o;
    o.argv = {
        BuildPath("tests/checkpoint_writer"), "--etcd", server_->endpoint(), "--job", job, "--dir", dir};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.log_path = dir_ + "/writer" + std::to_string(run) + ".log";
    auto p = Subprocess::Spawn(o);
    if (!p.ok()) {
      ADD_FAILURE() << p.status();
      return k;
    }
    if (wait_first && !(*p)->WaitForOutput("SAVED", std::chrono::seconds(30)))
      ADD_FAILURE() << (*p)->Output();
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 150)(rng)));
    (*p)->Kill();
    (void)(*p)->Wait(std::chrono::seconds(10));
    const std::string out = (*p)->Output();
    EXPECT_EQ(out.find("ERROR"), std::string::npos) << out;
    for (size_t at = out.find("SAVED "); at != std::string::npos; at = out.find("SAVED ", at + 1))
      k.reported = std::max<int64_t>(k.reported, std::stoll(out.substr(at + 6)));
    auto key = client_->Get(keys::Pserver(job, 0));
    if (!key.ok() || key->kvs.empty()) {
      ADD_FAILURE() << "run " << run << ": no pserver key";
      return k;
    }
    auto latest = Checkpointer(client_.get(), job, 0, key->kvs[0].create_revision, dir).LoadLatest();
    if (!latest.ok()) {
      ADD_FAILURE() << latest.status();
      return k;
    }
    k.loaded = std::move(*latest);
    return k;
  }
};

TEST_F(CheckpointCrashTest, KilledWhileWritingCheckpointsFiftyTimesTheNextStartAlwaysLoadsAGoodOne) {
  const std::string job = "crash", dir = dir_ + "/ckpt";
  std::mt19937 rng(2026);
  int64_t last_loaded = 0;
  int loaded_runs = 0;
  for (int run = 0; run < 50; ++run) {
    // Let it record at least once on the first run, then kill it somewhere in its loop.
    Killed k = RunAndKill(job, dir, run, rng, run == 0);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(k.loaded) << "run " << run << ": nothing loadable";
    const Checkpoint& c = *k.loaded;
    // Reported as recorded before the kill: the newest of those must not be lost.
    const int64_t reported = k.reported;
    EXPECT_GE(c.version, reported) << "run " << run << ": a recorded checkpoint was lost";
    EXPECT_GE(c.version, last_loaded) << "run " << run << ": went back in time";
    ASSERT_EQ(c.shard.dense.size(), 16u);  // 1 Mi floats in blocks of 64 Ki
    for (const auto& b : c.shard.dense) {
      ASSERT_TRUE(std::all_of(b.data.begin(), b.data.end(), [&](float x) { return x == c.version; }))
          << "run " << run << ": block " << b.block << " is not all " << c.version;
    }
    ASSERT_EQ(c.shard.sparse.size(), 1u);
    EXPECT_TRUE(std::all_of(c.shard.sparse[0].arena.begin(), c.shard.sparse[0].arena.end(),
                            [&](float x) { return x == c.version; }));
    last_loaded = c.version;
    ++loaded_runs;
    // After a start only the (at most two) recorded checkpoints stay on disk: files of killed
    // writes that were never recorded, and temp files, are gone.
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      ++files;
      EXPECT_EQ(e.path().extension(), ".tsck") << e.path();
    }
    EXPECT_LE(files, 2) << "run " << run;
  }
  EXPECT_EQ(loaded_runs, 50);
  std::printf("50 kills; the last checkpoint loaded has version %lld\n", static_cast<long long>(last_loaded));
}

TEST_F(CheckpointCrashTest, KilledWhileWritingDeltaCheckpointsFiftyTimesEveryRestartRebuildsItsVersion) {
  const std::string job = "deltas", dir = dir_ + "/ckpt";
  std::mt19937 rng(2027);
  int64_t last_loaded = 0;
  int delta_heads = 0;  // restarts whose newest good record was a delta
  for (int run = 0; run < 50; ++run) {
    // Each run first loads the chain and saves once (whole or not), then deltas follow.
    Killed k = RunAndKill(job, dir, run, rng, true, {"--deltas"});
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(k.loaded) << "run " << run << ": nothing loadable";
    const Checkpoint& c = *k.loaded;
    const int64_t v = c.version;
    EXPECT_GE(v, k.reported) << "run " << run << ": a recorded checkpoint was lost";
    EXPECT_GE(v, last_loaded) << "run " << run << ": went back in time";
    ASSERT_FALSE(c.shard.delta);
    ASSERT_EQ(c.shard.dense.size(), 1u);
    EXPECT_TRUE(std::all_of(c.shard.dense[0].data.begin(), c.shard.dense[0].data.begin() + kDeltaDenseFloats,
                            [&](float x) { return x == v; }))
        << "run " << run << ": dense values are not all " << v;
    ASSERT_EQ(c.shard.sparse.size(), 1u);
    const auto& t = c.shard.sparse[0];
    ASSERT_EQ(t.keys.size(), DeltaRowCount(v)) << "run " << run;
    size_t wrong = 0;
    for (size_t r = 0; r < t.keys.size(); ++r)
      wrong +=
          t.arena[r * 8] != DeltaRowValue(t.keys[r], v) || t.arena[r * 8 + 7] != DeltaRowValue(t.keys[r], v);
    ASSERT_EQ(wrong, 0u) << "run " << run << ": rows that are not as of version " << v;
    last_loaded = v;
    // The record says whether the newest was a delta; only files of the records stay on disk.
    auto rec = client_->Get(keys::Checkpoint(job, 0));
    ASSERT_TRUE(rec.ok() && !rec->kvs.empty());
    auto records = DecodeCheckpointRecords(rec->kvs[0].value);
    ASSERT_TRUE(records.ok());
    delta_heads += (*records)[0].delta() && (*records)[0].version == v;
    std::set<std::string> named;
    for (const auto& r : *records)
      for (const auto& f : r.Files()) named.insert(CheckpointPath(dir, job, 0, f.uuid));
    for (const auto& e : std::filesystem::directory_iterator(dir))
      EXPECT_TRUE(named.count(e.path().string())) << "run " << run << ": stray " << e.path();
  }
  // Most kills must land while deltas are written, or this tested little.
  EXPECT_GE(delta_heads, 25);
  std::printf(
      "50 kills; the last checkpoint loaded has version %lld; %d restarts loaded a chain ending in a "
      "delta\n",
      static_cast<long long>(last_loaded), delta_heads);
}

}  // namespace
}  // namespace tessera::testing
