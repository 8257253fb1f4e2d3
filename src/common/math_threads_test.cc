// MathThreadEnv: each trainer's share of the cores, unless the user chose.
#include "common/math_threads.h"

#include <gtest/gtest.h>

#include <map>

#include "common/fake_getenv.h"

namespace tessera {
namespace {

std::vector<std::pair<std::string, std::string>> All(const std::string& n) {
  return {{"OMP_NUM_THREADS", n}, {"OPENBLAS_NUM_THREADS", n}, {"MKL_NUM_THREADS", n}};
}

TEST(MathThreadEnvTest, EachProcessGetsItsShareOfTheCoresAndAtLeastOne) {
  EXPECT_EQ(MathThreadEnv(2, 3, FakeGetenv({})), All("1")) << "two trainers and a pserver on two cores";
  EXPECT_EQ(MathThreadEnv(2, 2, FakeGetenv({})), All("1"));
  EXPECT_EQ(MathThreadEnv(1, 1, FakeGetenv({})), All("1"));
  EXPECT_EQ(MathThreadEnv(32, 6, FakeGetenv({})), All("5")) << "rounded down: never more threads than cores";
  EXPECT_EQ(MathThreadEnv(8, 1, FakeGetenv({})), All("8"));
  EXPECT_EQ(MathThreadEnv(0, 4, FakeGetenv({})), All("1")) << "cores unknown";
}

TEST(MathThreadEnvTest, NothingWhenTheUserChoseOrTheProcessesAreUnknown) {
  for (const char* var : kMathThreadVars) {
    EXPECT_TRUE(MathThreadEnv(2, 3, FakeGetenv({{var, "4"}})).empty()) << var << " set: the user chose";
    EXPECT_TRUE(MathThreadEnv(2, 3, FakeGetenv({{var, ""}})).empty()) << var << " set, even empty";
  }
  EXPECT_TRUE(MathThreadEnv(2, 0, FakeGetenv({})).empty());
  EXPECT_TRUE(MathThreadEnv(2, -1, FakeGetenv({})).empty());
  EXPECT_EQ(MathThreadEnv(2, 2, FakeGetenv({{"OMP_PROC_BIND", "true"}})), All("1"))
      << "other variables do not count";
}

}  // namespace
}  // namespace tessera
