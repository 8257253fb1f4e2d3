// ConfinedDir against what a hostile job can leave in its run directory: links to the host's
// secrets (as a file, as a directory on the way), a FIFO that would block the reader, "..", an
// absolute path, a file larger than the reader takes. Each is refused by name and nothing blocks.
#include "sandbox/confined_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/files.h"

namespace tessera::sandbox {
namespace {

namespace fs = std::filesystem;

class ConfinedDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = MakeTempDir("confined-dir-test-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
    fs::create_directories(dir_ + "/run/logs");
    Write("run/result.json", "{\"ok\": true}\n");
    Write("run/logs/trainer-0.log", "line 1\nline 2\nline 3\n");
    Write("outside-secret", "the server's secret\n");
    fs::create_symlink(dir_ + "/outside-secret", dir_ + "/run/logs/pserver-0.log");
    fs::create_symlink("/etc", dir_ + "/run/etc");
    fs::create_directory_symlink(dir_, dir_ + "/run/up");
    ASSERT_EQ(::mkfifo((dir_ + "/run/history.jsonl").c_str(), 0600), 0);
  }
  void TearDown() override { (void)RemoveAll(dir_); }
  void Write(const std::string& rel, const std::string& text) { std::ofstream(dir_ + "/" + rel) << text; }
  std::string dir_;
};

TEST_F(ConfinedDirTest, ItsOwnRegularFilesReadAsUsual) {
  ConfinedDir d(dir_ + "/run");
  auto r = d.Read("result.json", 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "{\"ok\": true}\n");
  EXPECT_EQ(d.Size("logs/trainer-0.log"), 21);
  EXPECT_EQ(d.ReadRange("logs/trainer-0.log", 7, 6), "line 2");
  EXPECT_EQ(d.TailLines("logs/trainer-0.log", 2), "line 2\nline 3\n");
  EXPECT_EQ(d.Files("logs", ".log"), std::vector<std::string>{"trainer-0.log"}) << "the link is not listed";
}

TEST_F(ConfinedDirTest, LinksAndWaysOutAreRefusedByName) {
  ConfinedDir d(dir_ + "/run");
  for (const std::string rel : {"logs/pserver-0.log", "etc/passwd", "up/outside-secret", "../outside-secret",
                                "/etc/passwd", "logs/../result.json", "./result.json", ""}) {
    auto r = d.Read(rel, 1 << 20);
    ASSERT_FALSE(r.ok()) << rel << " was read: " << *r;
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << rel << ": " << r.status();
    EXPECT_EQ(d.Size(rel), -1) << rel;
    EXPECT_EQ(d.ReadRange(rel, 0, 100), "") << rel;
    EXPECT_EQ(d.TailLines(rel, 5), "") << rel;
  }
  EXPECT_EQ(d.Read("missing.json", 10).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(d.Files("up", "").empty()) << "a linked directory is not listed through";
}

TEST_F(ConfinedDirTest, AFifoIsRefusedWithoutBlockingAndABigFileIsNotReadWhole) {
  ConfinedDir d(dir_ + "/run");
  const auto start = std::chrono::steady_clock::now();
  auto r = d.Read("history.jsonl", 1 << 20);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(std::string(r.status().message()).find("not a regular file"), std::string::npos);

  {
    std::ofstream big(dir_ + "/run/model.tsm");
    big.seekp((int64_t{1} << 30) - 1);  // a sparse gigabyte: nothing on disk, all of it to read
    big << 'x';
  }
  auto m = d.Read("model.tsm", 64 << 20);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(d.ReadRange("model.tsm", 0, int64_t{1} << 40).size(), size_t{64} << 20)
      << "a range is capped too";
}

}  // namespace
}  // namespace tessera::sandbox
