// MathThreadEnv: each trainer's share of the cores, unless the user chose.
#include "common/math_threads.h"

#include <gtest/gtest.h>

#include <map>

namespace tessera {
namespace {

std::function<const char*(const char*)> Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::vector<std::pair<std::string, std::string>> All(const std::string& n) {
  return {{"OMP_NUM_THREADS", n}, {"OPENBLAS_NUM_THREADS", n}, {"MKL_NUM_THREADS", n}};
}

TEST(MathThreadEnvTest, EachProcessGetsItsShareOfTheCoresAndAtLeastOne) {
  EXPECT_EQ(MathThreadEnv(2, 3, Env({})), All("1")) << "two trainers and a pserver on two cores";
  EXPECT_EQ(MathThreadEnv(2, 2, Env({})), All("1"));
  EXPECT_EQ(MathThreadEnv(1, 1, Env({})), All("1"));
  EXPECT_EQ(MathThreadEnv(32, 6, Env({})), All("5")) << "rounded down: never more threads than cores";
  EXPECT_EQ(MathThreadEnv(8, 1, Env({})), All("8"));
  EXPECT_EQ(MathThreadEnv(0, 4, Env({})), All("1")) << "cores unknown";
}

TEST(MathThreadEnvTest, NothingWhenTheUserChoseOrTheProcessesAreUnknown) {
  for (const char* var : kMathThreadVars) {
    EXPECT_TRUE(MathThreadEnv(2, 3, Env({{var, "4"}})).empty()) << var << " set: the user chose";
    EXPECT_TRUE(MathThreadEnv(2, 3, Env({{var, ""}})).empty()) << var << " set, even empty";
  }
  EXPECT_TRUE(MathThreadEnv(2, 0, Env({})).empty());
  EXPECT_TRUE(MathThreadEnv(2, -1, Env({})).empty());
  EXPECT_EQ(MathThreadEnv(2, 2, Env({{"OMP_PROC_BIND", "true"}})), All("1"))
      << "other variables do not count";
}

}  // namespace
}  // namespace tessera
