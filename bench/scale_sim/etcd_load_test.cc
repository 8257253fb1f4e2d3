// The etcd load read from a /metrics text as etcd 3.4 writes it.
#include "etcd_load.h"

#include <gtest/gtest.h>

namespace tessera::bench {
namespace {

const char* kText = R"(# HELP grpc_server_handled_total Total number of RPCs completed on the server.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 120
grpc_server_handled_total{grpc_code="NotFound",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 3
grpc_server_handled_total{grpc_code="OK",grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"} 40
grpc_server_handled_total{grpc_code="OK",grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 7
grpc_server_handled_total{grpc_code="OK",grpc_method="LeaseGrant",grpc_service="etcdserverpb.Lease",grpc_type="unary"} 5
grpc_server_handled_total{grpc_code="OK",grpc_method="MemberList",grpc_service="etcdserverpb.Cluster",grpc_type="unary"} 9
grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} 1000
grpc_server_msg_received_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 30
grpc_server_msg_sent_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 300
etcd_debugging_mvcc_events_total 450
etcd_mvcc_db_total_size_in_bytes 2.097152e+06
etcd_mvcc_db_total_size_in_use_in_bytes 1.5e+06
etcd_debugging_mvcc_compact_revision 812
etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count 3
)";

TEST(EtcdLoadTest, CountsEachKindOfRequest) {
  auto load = ParseEtcdLoad(kText);
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ((*load)["range"], 123) << "every code counts";
  EXPECT_EQ((*load)["txn"], 40);
  EXPECT_EQ((*load)["put"], 7);
  EXPECT_EQ((*load)["lease_grant"], 5);
  EXPECT_EQ((*load)["keepalive"], 1000);
  EXPECT_EQ((*load)["watch_requests"], 30);
  EXPECT_EQ((*load)["watch_responses"], 300);
  EXPECT_EQ((*load)["watch_events"], 450);
  EXPECT_EQ((*load)["delete"], 0);
  EXPECT_EQ(load->db_bytes, 2097152);
  EXPECT_EQ(load->db_in_use_bytes, 1.5e6);
  EXPECT_EQ(load->compacted_revision, 812);
  EXPECT_EQ(load->compactions, 3);
  EXPECT_EQ(load->requests(), 123 + 40 + 7 + 5 + 1000 + 30) << "MemberList is the harness's, not counted";
}

TEST(EtcdLoadTest, RatesAreTheDifferencePerSecondAndClustersSum) {
  auto a = ParseEtcdLoad(kText);
  ASSERT_TRUE(a.ok());
  EtcdLoad b = *a;
  b.counts["range"] += 50;
  b.counts["keepalive"] += 400;
  const EtcdLoad r = RatesBetween(*a, b, 2.0);
  EXPECT_EQ(r["range"], 25);
  EXPECT_EQ(r["keepalive"], 200);
  EXPECT_EQ(r["txn"], 0);
  EXPECT_EQ(Sum(*a, *a)["txn"], 80);
  EXPECT_EQ(Sum(*a, *a).db_bytes, 2 * 2097152.0);
}

TEST(EtcdLoadTest, CountsByLabelSumsTheOtherLabels) {
  const std::string text =
      "# TYPE tessera_master_rpc_seconds histogram\n"
      "tessera_master_rpc_seconds_bucket{method=\"GetTask\",le=\"0.001\"} 3\n"
      "tessera_master_rpc_seconds_count{method=\"GetTask\"} 12\n"
      "tessera_master_rpc_seconds_count{method=\"Report\"} 30\n"
      "tessera_master_rpc_seconds_count{job=\"a\",method=\"Report\"} 5\n"
      "tessera_master_rpc_seconds_sum{method=\"Report\"} 0.5\n";
  auto c = CountsByLabel(text, "tessera_master_rpc_seconds_count", "method");
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c["GetTask"], 12);
  EXPECT_EQ(c["Report"], 35);
}

TEST(EtcdLoadTest, AnotherTextIsRefused) { EXPECT_FALSE(ParseEtcdLoad("# nothing\nup 1\n").ok()); }

}  // namespace
}  // namespace tessera::bench
