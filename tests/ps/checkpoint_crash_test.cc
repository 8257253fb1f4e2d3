// A checkpoint writer killed with SIGKILL at random moments, 50 times in a row: after every kill
// the checkpoint a restarting pserver would load is whole (every value is its version), is the
// newest one recorded or the one before it, and no older than the last one the writer reported.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "ps/ps_fixture.h"
#include "pserver/checkpointer.h"

namespace tessera::testing {
namespace {

TEST_F(PsTest, KilledWhileWritingCheckpointsFiftyTimesTheNextStartAlwaysLoadsAGoodOne) {
  const std::string job = "crash", dir = dir_ + "/ckpt";
  std::mt19937 rng(2026);
  int64_t last_loaded = 0;
  int loaded_runs = 0;
  for (int run = 0; run < 50; ++run) {
    SpawnOptions o;
    o.argv = {
        BuildPath("tests/checkpoint_writer"), "--etcd", server_->endpoint(), "--job", job, "--dir", dir};
    o.log_path = dir_ + "/writer" + std::to_string(run) + ".log";
    auto p = Subprocess::Spawn(o);
    ASSERT_TRUE(p.ok()) << p.status();
    // Let it record at least once on the first run, then kill it somewhere in its loop.
    if (run == 0) {
      ASSERT_TRUE((*p)->WaitForOutput("SAVED", std::chrono::seconds(30))) << (*p)->Output();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 150)(rng)));
    (*p)->Kill();
    (void)(*p)->Wait(std::chrono::seconds(10));
    ASSERT_EQ((*p)->Output().find("ERROR"), std::string::npos) << (*p)->Output();
    // Reported as recorded before the kill: the newest of those must not be lost.
    int64_t reported = 0;
    std::string out = (*p)->Output();
    for (size_t at = out.find("SAVED "); at != std::string::npos; at = out.find("SAVED ", at + 1)) {
      reported = std::max<int64_t>(reported, std::stoll(out.substr(at + 6)));
    }
    auto key = client_->Get(keys::Pserver(job, 0));
    ASSERT_TRUE(key.ok() && !key->kvs.empty());
    Checkpointer ck(client_.get(), job, 0, key->kvs[0].create_revision, dir);
    auto latest = ck.LoadLatest();
    ASSERT_TRUE(latest.ok()) << latest.status();
    ASSERT_TRUE(latest->has_value()) << "run " << run << ": nothing loadable";
    const Checkpoint& c = **latest;
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

}  // namespace
}  // namespace tessera::testing
