#include "pserver/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/denormals.h"

namespace tessera {
namespace {

// Textbook formulas in double precision, one element at a time.
struct Reference {
  OptimizerConfig c;
  double w, s1 = 0, s2 = 0;
  int64_t t = 0;
  void Step(double g_sum, double scale) {
    double g = g_sum * scale + c.weight_decay * w;
    ++t;
    switch (c.type) {
      case OptimizerConfig::Type::kSgd:
        w -= c.lr * g;
        break;
      case OptimizerConfig::Type::kMomentum:
        s1 = c.momentum * s1 + g;
        w -= c.lr * (c.nesterov ? g + c.momentum * s1 : s1);
        break;
      case OptimizerConfig::Type::kAdagrad:
        s1 += g * g;
        w -= c.lr * g / (std::sqrt(s1) + c.eps);
        break;
      case OptimizerConfig::Type::kAdam: {
        s1 = c.beta1 * s1 + (1 - c.beta1) * g;
        s2 = c.beta2 * s2 + (1 - c.beta2) * g * g;
        double mhat = s1 / (1 - std::pow(c.beta1, t));
        double vhat = s2 / (1 - std::pow(c.beta2, t));
        w -= c.lr * mhat / (std::sqrt(vhat) + c.eps);
        break;
      }
      case OptimizerConfig::Type::kFtrl: {  // McMahan et al. 2013, Algorithm 1 (s1 = z, s2 = n)
        const double alpha = c.lr, sigma = (std::sqrt(s2 + g * g) - std::sqrt(s2)) / alpha;
        s1 += g - sigma * w;
        s2 += g * g;
        w = std::abs(s1) <= c.l1
                ? 0.0
                : -(s1 - (s1 < 0 ? -1 : 1) * c.l1) / ((c.ftrl_beta + std::sqrt(s2)) / alpha + c.l2);
        break;
      }
    }
  }
};

void CheckAgainstReference(const std::string& spec) {
  auto c = OptimizerConfig::Parse(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  const size_t n = 37;  // odd: exercises the vector loop's tail
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> w(n), s1(n), s2(n), g(n);
  std::vector<Reference> ref(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = dist(rng);
    ref[i] = Reference{*c, w[i]};
  }
  InitState(*c, s1.data(), s2.data(), n);
  for (size_t i = 0; i < n; ++i) ref[i].s1 = s1[i];
  // A second copy updated with its new values also written to `out` (a pull reply waiting).
  std::vector<float> w2 = w, s1b = s1, s2b = s2, out(n);
  for (int64_t t = 1; t <= 20; ++t) {
    for (auto& x : g) x = dist(rng) * 4;
    const float scale = 0.25f;  // four samples
    ApplyUpdate(*c, w.data(), g.data(), scale, n, s1.data(), s2.data(), t);
    std::fill(out.begin(), out.end(), -1.0f);
    ApplyUpdate(*c, w2.data(), g.data(), scale, n, s1b.data(), s2b.data(), t, out.data());
    for (size_t i = 0; i < n; ++i) ref[i].Step(g[i], scale);
    // The same bits either way, and `out` holds the new values.
    ASSERT_EQ(0, std::memcmp(w.data(), w2.data(), n * sizeof(float))) << spec << " step " << t;
    ASSERT_EQ(0, std::memcmp(out.data(), w.data(), n * sizeof(float))) << spec << " step " << t;
  }
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(w[i], ref[i].w, 1e-5 * std::max(1.0, std::abs(ref[i].w))) << spec << " element " << i;
  }
}

TEST(OptimizerTest, SgdMatchesTheTextbook) { CheckAgainstReference("sgd:lr=0.1"); }
TEST(OptimizerTest, SgdWithWeightDecayMatchesTheTextbook) {
  CheckAgainstReference("sgd:lr=0.1,weight_decay=0.01");
}
TEST(OptimizerTest, MomentumMatchesTheTextbook) { CheckAgainstReference("momentum:lr=0.05,momentum=0.9"); }
TEST(OptimizerTest, NesterovMatchesTheTextbook) {
  CheckAgainstReference("momentum:lr=0.05,momentum=0.8,nesterov=1");
}
TEST(OptimizerTest, AdagradMatchesTheTextbook) {
  CheckAgainstReference("adagrad:lr=0.1,initial_accumulator=0.1");
}
TEST(OptimizerTest, AdamMatchesTheTextbook) { CheckAgainstReference("adam:lr=0.01,beta1=0.9,beta2=0.99"); }
TEST(OptimizerTest, AdamWithWeightDecayMatchesTheTextbook) {
  CheckAgainstReference("adam:lr=0.01,weight_decay=0.1");
}

TEST(OptimizerTest, FtrlMatchesThePaper) { CheckAgainstReference("ftrl:alpha=0.1,beta=1,l1=0.5,l2=0.1"); }
TEST(OptimizerTest, FtrlWithoutRegularizationMatchesThePaper) { CheckAgainstReference("ftrl:alpha=0.05"); }

// FTRL's L1 makes exact zeros: coordinates whose gradients stay small stay at 0.
TEST(OptimizerTest, FtrlL1GivesExactZerosForWeakFeatures) {
  auto c = OptimizerConfig::Parse("ftrl:alpha=0.1,beta=1,l1=2,l2=0");
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> w(2, 0.0f), z(2), n(2), g(2);
  InitState(*c, z.data(), n.data(), 2);
  for (int t = 1; t <= 50; ++t) {
    g = {0.01f, 1.0f};  // a weak feature and a strong one
    ApplyUpdate(*c, w.data(), g.data(), 1.0f, 2, z.data(), n.data(), t);
  }
  EXPECT_EQ(w[0], 0.0f) << "|z| stays under l1";
  EXPECT_LT(w[1], 0.0f) << "a steady positive gradient drives the weight down";
}

// A parameter whose gradient stays zero has its Adam moments decay by beta each step, into the
// denormal range, where arithmetic takes a slow path: the kernel takes them as zero instead, and
// leaves the calling thread's floating-point mode as it found it.
TEST(OptimizerTest, DecayingStateIsFlushedToZeroInsteadOfGoingDenormal) {
  auto c = OptimizerConfig::Parse("adam:lr=0.01,beta1=0.9,beta2=0.99");
  ASSERT_TRUE(c.ok());
  const float denormal = std::numeric_limits<float>::min() / 4;  // below the smallest normal
  ASSERT_GT(denormal, 0.0f);
  ASSERT_EQ(std::fpclassify(denormal), FP_SUBNORMAL);
  const float smallest = std::numeric_limits<float>::min();
  std::vector<float> w = {0.5f, 0.5f}, g = {0.0f, 0.0f}, m = {denormal, smallest * 1.05f},
                     v = {denormal, 1.0f};
  EXPECT_FALSE(ScopedFlushDenormals::active());
  ApplyUpdate(*c, w.data(), g.data(), 1.0f, 2, m.data(), v.data(), 7);
  EXPECT_FALSE(ScopedFlushDenormals::active()) << "the caller's mode was not restored";
  EXPECT_EQ(m[0], 0.0f) << "a denormal moment was kept (and decayed): " << m[0];
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(m[1], 0.0f) << "0.9 x 1.05 x the smallest normal is denormal: flushed";
  EXPECT_GT(v[1], 0.9f);
  for (float x : m) EXPECT_NE(std::fpclassify(x), FP_SUBNORMAL);
  EXPECT_EQ(w[0], 0.5f);

  {  // nested scopes: the inner one leaves the outer's mode on
    const ScopedFlushDenormals outer;
    EXPECT_TRUE(ScopedFlushDenormals::active());
    ApplyUpdate(*c, w.data(), g.data(), 1.0f, 2, m.data(), v.data(), 8);
    EXPECT_TRUE(ScopedFlushDenormals::active());
  }
  EXPECT_FALSE(ScopedFlushDenormals::active());
}

TEST(OptimizerTest, SpecsParseValidateAndRoundTrip) {
  for (const char* s : {"sgd:lr=0.5", "momentum:lr=0.1,momentum=0.5,nesterov=1", "adagrad:lr=0.1,eps=1e-06",
                        "adam:lr=0.001,beta1=0.8,beta2=0.9,eps=1e-07", "sgd:lr=0.1,weight_decay=0.001",
                        "ftrl:alpha=0.2,beta=0.5,l1=1,l2=0.01", "ftrl", "adam:lr=0.01,weight_decay=0.01"}) {
    auto c = OptimizerConfig::Parse(s);
    ASSERT_TRUE(c.ok()) << s << ": " << c.status();
    auto again = OptimizerConfig::Parse(c->ToString());
    ASSERT_TRUE(again.ok()) << c->ToString();
    EXPECT_EQ(*again, *c) << s;
  }
  EXPECT_EQ(OptimizerConfig::Parse("rmsprop").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(OptimizerConfig::Parse("sgd:lr=-1").status().message().find("lr"), std::string::npos);
  EXPECT_NE(OptimizerConfig::Parse("adam:gamma=1").status().message().find("gamma"), std::string::npos);
  EXPECT_FALSE(OptimizerConfig::Parse("sgd:lr=abc").ok());
  EXPECT_FALSE(OptimizerConfig::Parse("momentum:momentum=1.5").ok());
  // FTRL's settings belong to FTRL, and are checked.
  EXPECT_NE(OptimizerConfig::Parse("adam:l1=1").status().message().find("has no setting 'l1' (ftrl has)"),
            std::string::npos);
  EXPECT_NE(OptimizerConfig::Parse("ftrl:l1=-1").status().message().find("l1 must be >= 0"),
            std::string::npos);
  EXPECT_NE(OptimizerConfig::Parse("ftrl:alpha=0").status().message().find("positive"), std::string::npos);
  auto f = OptimizerConfig::Parse("ftrl:l1=1");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ToString(), "ftrl:alpha=0.1,beta=1,l1=1,l2=0");
  EXPECT_EQ(f->StateArrays(), 2);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A gradient with long runs of zeros (a top-k push): for sgd and adagrad the runs are skipped, and
// the values, the state and a reply written by the apply are what applying every element gives.
TEST(OptimizerTest, RunsOfZeroGradientsChangeNothingAndAreSkipped) {
  for (const char* spec : {"sgd:lr=0.1", "adagrad:lr=0.05", "adam:lr=0.01"}) {
    SCOPED_TRACE(spec);
    const OptimizerConfig c = *OptimizerConfig::Parse(spec);
    const size_t n = 4096;
    std::vector<float> g(n, 0.0f);
    for (size_t i = 0; i < n; i += 997) g[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;  // sparse
    std::vector<float> w(n), s1(n), s2(n);
    for (size_t i = 0; i < n; ++i) w[i] = 0.001f * static_cast<float>(i);
    InitState(c, s1.data(), s2.data(), n);
    std::vector<float> w_one = w, s1_one = s1, s2_one = s2, out(n, -1.0f);
    ApplyUpdate(c, w.data(), g.data(), 0.5f, n, s1.data(), s2.data(), 1, out.data());
    for (size_t i = 0; i < n; ++i)  // element by element: nothing to skip
      ApplyUpdate(c, &w_one[i], &g[i], 0.5f, 1, &s1_one[i], &s2_one[i], 1);
    EXPECT_EQ(w, w_one);
    EXPECT_EQ(s1, s1_one);
    EXPECT_EQ(out, w) << "a reply written by the apply holds every value";
  }
}

}  // namespace
}  // namespace tessera
