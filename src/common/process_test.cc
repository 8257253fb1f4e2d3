// Unit tests of Process: what a child whose program cannot be run leaves in its log.
#include "common/process.h"

#include <gtest/gtest.h>

#include "common/files.h"

namespace tessera {
namespace {

TEST(ProcessTest, AProgramThatCannotBeRunSaysSoInItsLog) {
  auto dir = MakeTempDir("process-test-");
  ASSERT_TRUE(dir.ok());
  struct Cleanup {
    std::string dir;
    ~Cleanup() { (void)RemoveAll(dir); }
  } cleanup{*dir};
  ProcessOptions o;
  o.argv = {"/nonexistent/tessera-test-program", "--flag"};
  o.log_path = *dir + "/child.log";
  auto p = Process::Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status();
  auto code = (*p)->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 127);
  EXPECT_EQ((*p)->Output(), "cannot execute /nonexistent/tessera-test-program: errno 2\n");  // ENOENT
}

}  // namespace
}  // namespace tessera
