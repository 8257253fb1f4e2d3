#include <gtest/gtest.h>

#include <random>

#include "common/files.h"
#include "recordio/file.h"

namespace tessera::recordio {
namespace {

class RecordIoTest : public ::testing::TestWithParam<Compressor> {
 protected:
  void SetUp() override {
    auto d = MakeTempDir("recordio-test-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override { (void)RemoveAll(dir_); }

  // Writes records into chunks of ~`chunk` raw bytes; returns the file path.
  std::string Write(const std::vector<std::string>& recs, size_t chunk) {
    std::string path = dir_ + "/f.rio";
    auto f = ChunkFile::Create(path);
    EXPECT_TRUE(f.ok());
    ChunkBuilder b(GetParam(), chunk);
    std::string enc;
    ChunkHeader h;
    for (const auto& r : recs) {
      b.Add(r);
      if (b.full()) {
        b.Take(&enc, &h);
        EXPECT_TRUE((*f)->Append(enc).ok());
      }
    }
    if (!b.empty()) {
      b.Take(&enc, &h);
      EXPECT_TRUE((*f)->Append(enc).ok());
    }
    EXPECT_TRUE((*f)->Close().ok());
    return path;
  }

  StatusOr<std::vector<std::string>> ReadAll(const std::string& path) {
    TESSERA_ASSIGN_OR_RETURN(auto r, FileReader::Open(path));
    std::vector<std::string> out;
    std::vector<std::string_view> recs;
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool more, r->Next(&recs));
      if (!more) break;
      for (auto v : recs) out.emplace_back(v);
    }
    return out;
  }

  std::vector<std::string> Records(int n) {
    std::mt19937 rng(5);
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
      std::string s(rng() % 300, '\0');
      for (auto& c : s) c = static_cast<char>('a' + rng() % 7);  // compressible
      out.push_back(s);
    }
    out.push_back("");  // an empty record survives too
    return out;
  }

  std::string dir_;
};

TEST_P(RecordIoTest, RoundTripOverManyChunks) {
  auto recs = Records(2000);
  std::string path = Write(recs, 4096);
  auto back = ReadAll(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, recs);
}

TEST_P(RecordIoTest, EverySingleByteFlipIsDetectedAndNamed) {
  std::vector<std::string> recs = {"alpha", "beta", "gamma", std::string(100, 'x'), "delta"};
  std::string path = Write(recs, 64);  // several chunks
  auto good = ReadFile(path);
  ASSERT_TRUE(good.ok());
  for (size_t i = 0; i < good->size(); ++i) {
    std::string bad = *good;
    bad[i] ^= 0x01;
    ASSERT_TRUE(WriteFileAtomic(path, bad).ok());
    auto r = ReadAll(path);
    ASSERT_FALSE(r.ok()) << "flip at byte " << i << " went unnoticed";
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("f.rio chunk "), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find(" at offset "), std::string::npos) << r.status();
  }
}

TEST_P(RecordIoTest, TruncationIsDetectedAtEveryLength) {
  auto recs = Records(50);
  std::string path = Write(recs, 2048);
  auto good = ReadFile(path);
  ASSERT_TRUE(good.ok());
  for (size_t len = 1; len < good->size(); len += 97) {
    ASSERT_TRUE(WriteFileAtomic(path, good->substr(0, len)).ok());
    auto r = ReadAll(path);
    // Cutting exactly at a chunk boundary leaves a shorter but valid file: that is caught by the
    // manifest's chunk list; anything else is a truncated chunk.
    if (r.ok()) {
      EXPECT_LT(r->size(), recs.size());
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
      EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status();
    }
  }
}

TEST_P(RecordIoTest, ReadChunkAtChecksAgainstTheManifest) {
  std::vector<std::string> recs = {"one", "two"};
  std::string path = Write(recs, 1 << 20);
  std::string stored, scratch;
  std::vector<std::string_view> out;
  ASSERT_TRUE(ReadChunkAt(path, 0, nullptr, "c0", &stored, &scratch, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1], "two");
  ChunkInfo wrong;
  wrong.records = 3;
  auto s = ReadChunkAt(path, 0, &wrong, "c0", &stored, &scratch, &out);
  EXPECT_NE(s.message().find("does not match the manifest"), std::string::npos) << s;
  EXPECT_EQ(ReadChunkAt(path, 5, nullptr, "c0", &stored, &scratch, &out).code(), StatusCode::kDataLoss);
  EXPECT_EQ(ReadChunkAt(dir_ + "/missing", 0, nullptr, "c0", &stored, &scratch, &out).code(),
            StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Compressors, RecordIoTest, ::testing::Values(Compressor::kNone, Compressor::kZstd),
                         [](const auto& info) { return std::string(CompressorName(info.param)); });

}  // namespace
}  // namespace tessera::recordio
