// Packing a directory as a job's code: ignore rules, the same bytes for the same files, links
// skipped, size limits with the largest files named, and an archive that reads back whole.
#include "remote/pack.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/files.h"

namespace tessera::remote {
namespace {

TEST(Pack, IgnorePatterns) {
  auto p = ParseIgnorePatterns("# comment\n\n  *.csv \ndata/\n/build\nsub/*.bin\r\n");
  ASSERT_EQ(p, (std::vector<std::string>{"*.csv", "data/", "/build", "sub/*.bin"}));
  EXPECT_TRUE(IsIgnored("a.csv", false, p));
  EXPECT_TRUE(IsIgnored("x/y/a.csv", false, p));
  EXPECT_TRUE(IsIgnored("x/data", true, p));
  EXPECT_FALSE(IsIgnored("x/data", false, p)) << "data/ is for directories";
  EXPECT_TRUE(IsIgnored("build", true, p));
  EXPECT_FALSE(IsIgnored("src/build", true, p)) << "/build is at the top only";
  EXPECT_TRUE(IsIgnored("sub/x.bin", false, p));
  EXPECT_FALSE(IsIgnored("sub/deeper/x.bin", false, p));
  EXPECT_FALSE(IsIgnored("train.py", false, p));
}

class PackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = MakeTempDir("tessera-pack-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override { (void)RemoveAll(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(dir_ + "/" + rel).parent_path());
    std::ofstream(dir_ + "/" + rel) << text;
  }
  // path -> content of the files in a .tar.gz.
  static std::map<std::string, std::string> Read(const std::string& bytes) {
    std::map<std::string, std::string> out;
    archive* a = archive_read_new();
    archive_read_support_filter_all(a);
    archive_read_support_format_all(a);
    EXPECT_EQ(archive_read_open_memory(a, bytes.data(), bytes.size()), ARCHIVE_OK);
    archive_entry* e;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
      if (archive_entry_filetype(e) != AE_IFREG) continue;
      std::string content(static_cast<size_t>(archive_entry_size(e)), '\0');
      archive_read_data(a, content.data(), content.size());
      out[archive_entry_pathname(e)] = content;
    }
    archive_read_free(a);
    return out;
  }
  std::string dir_;
};

TEST_F(PackTest, PacksWhatMattersTheSameWayEveryTime) {
  Write("train.py", "print('hi')\n");
  Write("lib/model.py", "x = 1\n");
  Write("lib/__pycache__/model.cpython-311.pyc", "junk");
  Write(".git/HEAD", "ref");
  Write("data/big.csv", "1,2\n");
  Write("notes.csv", "1,2\n");
  Write(".tesseraignore", "*.csv\n");
  ASSERT_EQ(::symlink("/etc/passwd", (dir_ + "/link").c_str()), 0);
  auto a = PackDirectory(dir_);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->files, 3) << "train.py, lib/model.py, .tesseraignore";
  ASSERT_EQ(a->skipped.size(), 1u);
  EXPECT_EQ(a->skipped[0], "link (a symbolic link)");
  auto files = Read(a->bytes);
  EXPECT_EQ(files.size(), 3u);
  EXPECT_EQ(files["train.py"], "print('hi')\n");
  EXPECT_EQ(files["lib/model.py"], "x = 1\n");
  EXPECT_EQ(a->sha256.size(), 64u);
  ASSERT_GT(a->bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(a->bytes[0]), 0x1f) << "gzip";
  EXPECT_LT(a->bytes.size(), 1000u) << "three small files make a small package";
  // Touched again, the same files make the same package.
  ::utimes((dir_ + "/train.py").c_str(), nullptr);
  auto b = PackDirectory(dir_);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->sha256, b->sha256);
  Write("train.py", "print('changed')\n");
  EXPECT_NE(PackDirectory(dir_)->sha256, a->sha256);
}

TEST_F(PackTest, RefusesWhatIsTooBigNamingTheLargestFiles) {
  Write("train.py", "print('hi')\n");
  std::string noise;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < (300 << 10); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    noise.push_back(static_cast<char>(x));
  }
  Write("weights.bin", noise);
  PackLimits small;
  small.max_compressed = 100 << 10;
  auto r = PackDirectory(dir_, small);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("weights.bin (300"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find(".tesseraignore"), std::string::npos) << r.status();
  small.max_raw = 1000;
  EXPECT_FALSE(PackDirectory(dir_, small).ok());
  EXPECT_TRUE(PackDirectory(dir_).ok());
  auto empty = MakeTempDir("tessera-pack-empty-");
  auto none = PackDirectory(*empty);
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no files"), std::string::npos);
  EXPECT_FALSE(PackDirectory(*empty + "/missing").ok());
  (void)RemoveAll(*empty);
}

}  // namespace
}  // namespace tessera::remote
