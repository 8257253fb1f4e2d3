#include "common/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace tessera {
namespace {

TEST(FilesTest, AtomicWriteReplacesAndLeavesNoTemporaries) {
  auto dir = MakeTempDir("files-test-");
  ASSERT_TRUE(dir.ok());
  std::string path = *dir + "/x";
  ASSERT_TRUE(WriteFileAtomic(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "two").ok());
  EXPECT_EQ(*ReadFile(path), "two");
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(*dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_EQ(ReadFile(*dir + "/missing").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(RemoveAll(*dir).ok());
  EXPECT_FALSE(std::filesystem::exists(*dir));
}

TEST(FilesTest, TailLinesGivesTheLastLinesOfALog) {
  auto dir = MakeTempDir("files-test-");
  ASSERT_TRUE(dir.ok());
  std::string path = *dir + "/log";
  ASSERT_TRUE(WriteFileAtomic(path, "one\ntwo\nthree\nfour\n").ok());
  EXPECT_EQ(TailLines(path, 2), "three\nfour");
  EXPECT_EQ(TailLines(path, 10), "one\ntwo\nthree\nfour");
  EXPECT_EQ(TailLines(path, 0), "");
  ASSERT_TRUE(WriteFileAtomic(path, "no newline at the end").ok());
  EXPECT_EQ(TailLines(path, 1), "no newline at the end");
  EXPECT_EQ(TailLines(*dir + "/missing", 3), "");
  ASSERT_TRUE(RemoveAll(*dir).ok());
}

TEST(OthersMayReadTest, OnlyTheOwnerOrTheProcesssOwnGroup) {
  struct stat st {};
  st.st_gid = ::getegid();
  for (mode_t m : {0600, 0400, 0640, 0440, 0660}) {
    st.st_mode = S_IFREG | m;
    EXPECT_FALSE(OthersMayRead(st)) << std::oct << m;
  }
  for (mode_t m : {0644, 0604, 0601, 0666}) {
    st.st_mode = S_IFREG | m;
    EXPECT_TRUE(OthersMayRead(st)) << std::oct << m;
  }
  st.st_gid = ::getegid() + 1;  // another group's
  st.st_mode = S_IFREG | 0640;
  EXPECT_TRUE(OthersMayRead(st));
  st.st_mode = S_IFREG | 0600;
  EXPECT_FALSE(OthersMayRead(st));
}

}  // namespace
}  // namespace tessera
