// SseParser: events split anywhere by the network, CRLF, comments, multi-line data, ids kept
// across a Reset().
#include "remote/sse.h"

#include <gtest/gtest.h>

namespace tessera::remote {
namespace {

TEST(SseParser, EventsArrivingInAnyPiecesAreTheSame) {
  const std::string stream =
      ": still following\n\nid: 12\ndata: first line\n\nid: 30\r\ndata: second\r\n\r\nevent: end\ndata: the "
      "job has "
      "ended\n\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    SseParser p;
    std::vector<SseEvent> got;
    for (size_t at = 0; at < stream.size(); at += piece) {
      for (auto& e : p.Feed(stream.substr(at, piece))) got.push_back(e);
    }
    ASSERT_EQ(got.size(), 3u) << "piece " << piece;
    EXPECT_EQ(got[0].data, "first line");
    EXPECT_EQ(got[0].id, "12");
    EXPECT_EQ(got[0].event, "message");
    EXPECT_EQ(got[1].data, "second");
    EXPECT_EQ(got[1].id, "30");
    EXPECT_EQ(got[2].event, "end");
    EXPECT_EQ(got[2].id, "30") << "an event without an id keeps the last one";
    EXPECT_EQ(p.last_id(), "30");
  }
}

TEST(SseParser, DataLinesJoinAndFieldsWithoutSpaceWork) {
  SseParser p;
  auto got = p.Feed("data:a\ndata: b\ndata\nretry: 5\nunknown: x\n\n");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, "a\nb\n");
  EXPECT_TRUE(p.Feed("data: no blank line yet\n").empty());
}

TEST(SseParser, ResetDropsAPartialEventButKeepsTheLastId) {
  SseParser p;
  ASSERT_EQ(p.Feed("id: 7\ndata: whole\n\nid: 9\ndata: cut sh").size(), 1u);
  p.Reset();
  EXPECT_EQ(p.last_id(), "7");
  auto got = p.Feed("data: again\n\n");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, "again");
  EXPECT_EQ(got[0].id, "7");
}

}  // namespace
}  // namespace tessera::remote
