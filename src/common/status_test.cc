#include "tessera/status.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(StatusTest, DefaultIsOkAndCheap) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(sizeof(Status), sizeof(void*));
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = Status::NotFound("parameter 'w' is unknown");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: parameter 'w' is unknown");
  Status copy = s;
  EXPECT_EQ(copy, s);
  EXPECT_EQ(s.WithContext("pull").message(), "pull: parameter 'w' is unknown");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

TEST(StatusTest, CodesMatchGrpcNumbers) {
  EXPECT_EQ(static_cast<int>(StatusCode::kUnavailable), 14);
  EXPECT_EQ(static_cast<int>(StatusCode::kDataLoss), 15);
  EXPECT_EQ(static_cast<int>(StatusCode::kFailedPrecondition), 9);
}

StatusOr<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  TESSERA_ASSIGN_OR_RETURN(int h, Half(x));
  *out = h;
  return Status::OK();
}

TEST(StatusOrTest, ValueOrError) {
  auto a = Half(4);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 2);
  auto b = Half(3);
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.value_or(-1), -1);
  int out = 0;
  EXPECT_TRUE(UseHalf(8, &out).ok());
  EXPECT_EQ(out, 4);
  EXPECT_EQ(UseHalf(7, &out).code(), StatusCode::kInvalidArgument);
}

TEST(StatusOrTest, OkStatusBecomesInternalError) {
  StatusOr<int> s = Status::OK();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tessera
