#include "coord/etcd_types.h"

#include <gtest/gtest.h>

namespace tessera::etcd {
namespace {

TEST(EtcdTypesTest, PrefixEnd) {
  EXPECT_EQ(PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixEnd("ab"), "ac");
  EXPECT_EQ(PrefixEnd(std::string("a\xff")), "b");
  EXPECT_EQ(PrefixEnd(std::string("\xff\xff")), std::string(1, '\0'));
}

TEST(EtcdTypesTest, BuildersSetTheirFields) {
  auto c = Compare::Absent("/k");
  EXPECT_EQ(c.target, Compare::Target::kCreateRevision);
  EXPECT_EQ(c.result, Compare::Result::kEqual);
  EXPECT_EQ(c.number, 0);
  auto v = Compare::Value("/k", Compare::Result::kNotEqual, "x");
  EXPECT_EQ(v.value, "x");
  Txn inner;
  inner.success.push_back(Op::Put("/a", "1", 7));
  auto nested = Op::Nested(inner);
  ASSERT_TRUE(nested.txn);
  EXPECT_EQ(nested.txn->success[0].lease, 7);
  EXPECT_TRUE(Op::Delete("/p/", true).prefix);
}

}  // namespace
}  // namespace tessera::etcd
