// Unit test of the non-finite scan.
#include "common/finite.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "common/work_pool.h"

namespace tessera {
namespace {

TEST(FirstNonFiniteTest, FindsTheFirstNanOrInfinityAnywhereAndNothingElse) {
  const size_t n = 3 * 4096 + 17;
  std::vector<float> x(n, 1.0f);
  x[5] = std::numeric_limits<float>::max();
  x[6] = -std::numeric_limits<float>::max();
  x[7] = std::numeric_limits<float>::denorm_min();
  x[8] = -0.0f;
  EXPECT_EQ(FirstNonFinite(x.data(), n), -1);
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()};
  for (float b : bad) {
    for (size_t at : {size_t{0}, size_t{4095}, size_t{4096}, size_t{8191}, n - 1}) {
      std::vector<float> y = x;
      y[at] = b;
      EXPECT_EQ(FirstNonFinite(y.data(), n), static_cast<int64_t>(at)) << b << " at " << at;
      y[n - 1] = b;  // a later one does not hide the first
      EXPECT_EQ(FirstNonFinite(y.data(), n), static_cast<int64_t>(at));
    }
  }
  EXPECT_EQ(FirstNonFinite(x.data(), 0), -1);
}

TEST(FirstNonFiniteTest, ASharedScanFindsTheSameFirstOne) {
  const size_t n = (size_t{1} << 20) + 12345;
  std::vector<float> x(n, 0.5f);
  for (int threads : {1, 2, 3}) {
    WorkPool pool(threads);
    EXPECT_EQ(FirstNonFinite(x.data(), n, &pool), -1);
    for (size_t at : {size_t{0}, n / 3, n / 3 + 1, n / 2, n - 1}) {
      std::vector<float> y = x;
      y[at] = std::numeric_limits<float>::quiet_NaN();
      y[n - 1] = std::numeric_limits<float>::infinity();  // a later one does not hide the first
      EXPECT_EQ(FirstNonFinite(y.data(), n, &pool), static_cast<int64_t>(at))
          << threads << " threads, " << at;
    }
  }
  EXPECT_EQ(FirstNonFinite(x.data(), 10, nullptr), -1);
}

}  // namespace
}  // namespace tessera
