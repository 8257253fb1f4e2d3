// PlanPush over every verdict and every combination of facts: each rule the service relied on,
// checked where it applies.
#include "pserver/push_plan.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

using V = Consistency::PushVerdict;

TEST(PushPlanTest, EveryVerdictAndFactsGiveThePlanTheRulesSay) {
  int cases = 0;
  for (V v : {V::kHold, V::kApply, V::kDuplicate, V::kLate}) {
    for (int bits = 0; bits < (1 << 7); ++bits) {
      PushFacts f;
      f.stored_piece = bits & 1;
      f.async_piece = bits & 2;
      f.version_moved = bits & 4;
      f.samples = (bits & 8) ? 32 : 0;
      f.in_pieces = bits & 16;
      f.pulls_floats = bits & 32;
      f.replicated_sync = bits & 64;
      const PushPlan p = PlanPush(v, f);
      SCOPED_TRACE(::testing::Message() << "verdict " << static_cast<int>(v) << ", facts " << bits);
      // A retry or a late push changes nothing but the late count and where its trainer goes on.
      EXPECT_EQ(p.late, v == V::kLate);
      EXPECT_EQ(p.new_data, v == V::kHold || v == V::kApply);
      if (!p.new_data) {
        EXPECT_FALSE(p.counts || p.hold || p.apply_now || p.prepare_pull);
      }
      // Sync holds, async applies at once, and only a gradient with samples.
      EXPECT_EQ(p.hold, v == V::kHold);
      EXPECT_EQ(p.apply_now, v == V::kApply && f.samples > 0);
      EXPECT_FALSE(p.hold && p.apply_now);
      // The push is whole with this request unless it is a piece kept for later.
      EXPECT_EQ(p.hold_complete, p.hold && !f.stored_piece);
      // Counted once: an async piece when its push became whole, anything else unless kept for later.
      if (p.new_data) {
        EXPECT_EQ(p.counts, f.async_piece ? f.version_moved : !f.stored_piece);
      }
      // The reply is made before an apply only for a whole push that pulls values.
      EXPECT_EQ(p.prepare_pull, (p.hold || p.apply_now) && !f.in_pieces && f.pulls_floats);
      EXPECT_EQ(p.apply_ready, f.stored_piece);
      EXPECT_EQ(p.wait_for_step, f.replicated_sync);
      ++cases;
    }
  }
  EXPECT_EQ(cases, 4 * 128);
}

}  // namespace
}  // namespace tessera
