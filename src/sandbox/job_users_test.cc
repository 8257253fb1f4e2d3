// Job users: ranges refused with their reason, the lowest free id that the host does not know.
#include "sandbox/job_users.h"

#include <gtest/gtest.h>

namespace tessera::sandbox {
namespace {

TEST(JobUsersTest, RangesAreCheckedWithTheirReason) {
  auto r = ParseUidRange("61000000-61000009");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, 61000000u);
  EXPECT_EQ(r->last, 61000009u);
  for (const auto& [text, why] :
       std::vector<std::pair<std::string, std::string>>{{"61000000", "not a range"},
                                                        {"a-b", "not a range"},
                                                        {"-5-10", "not a range"},
                                                        {"2000-1999", "empty"},
                                                        {"0-100000", "below 1000"},
                                                        {"500-70000", "below 1000"},
                                                        {"60000-70000", "65534 (nobody)"},
                                                        {"4294967000-4294967295", "no user"}}) {
    auto bad = ParseUidRange(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(std::string(bad.status().message()).find(why), std::string::npos)
        << text << ": " << bad.status();
  }
}

TEST(JobUsersTest, TheLowestIdNeitherTakenNorKnownToTheHost) {
  const UidRange r{70000, 70004};
  auto none_known = [](uint32_t) { return false; };
  EXPECT_EQ(*PickUid(r, {}, none_known), 70000u);
  EXPECT_EQ(*PickUid(r, {70000, 70001}, none_known), 70002u);
  EXPECT_EQ(*PickUid(r, {70000}, [](uint32_t u) { return u == 70001 || u == 70002; }), 70003u);
  auto full = PickUid(r, {70000, 70001, 70002, 70003, 70004}, none_known);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(full.status().message()).find("--job-uids"), std::string::npos);
}

TEST(JobUsersTest, ItsOwnPasswdNamesItsUserAndNobodyElseOfTheHost) {
  const std::string p = PasswdText("ada", 61000003, "/job/home");
  EXPECT_NE(p.find("tessera-ada:x:61000003:61000003:"), std::string::npos) << p;
  EXPECT_NE(p.find(":/job/home:"), std::string::npos) << p;
  EXPECT_EQ(std::count(p.begin(), p.end(), '\n'), 3);
  EXPECT_NE(GroupText("ada", 61000003).find("tessera-ada:x:61000003:"), std::string::npos);
}

}  // namespace
}  // namespace tessera::sandbox
