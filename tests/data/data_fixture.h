// Helpers for data-set and master tests: run `tessera` subcommands as processes in a temp
// directory that is removed afterwards. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/files.h"
#include "harness/subprocess.h"

namespace tessera::testing {

struct Ran {
  int code = -1;
  std::string out;
};

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = MakeTempDir("data-test-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
  }
  void TearDown() override {
    if (!std::getenv("TESSERA_KEEP_TEST_DIR")) (void)RemoveAll(dir_);
  }

  Ran Tessera(const std::vector<std::string>& args,
              std::chrono::seconds timeout = std::chrono::seconds(120)) {
    SpawnOptions o;
    o.argv = {BuildPath("src/tessera")};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.log_path = dir_ + "/run" + std::to_string(runs_++) + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok());
    auto code = (*p)->Wait(timeout);
    return {code.value_or(-1), (*p)->Output()};
  }

  // Fashion-MNIST's training and test images as data sets "fm" and "fm-test" in `store`.
  ::testing::AssertionResult UploadFashionMnist(const std::string& store) {
    const std::string f = "/usr/share/datasets/fashion-mnist/";
    for (auto [name, images, labels] :
         {std::tuple{"fm", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
          std::tuple{"fm-test", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}}) {
      auto up = Tessera({"upload", "--store", store, "--dataset", name, "--format", "idx", "--images", f + images,
                         "--labels", f + labels});
      if (up.code != 0) return ::testing::AssertionFailure() << up.out;
    }
    return ::testing::AssertionSuccess();
  }

  std::string dir_;
  int runs_ = 0;
};

}  // namespace tessera::testing
