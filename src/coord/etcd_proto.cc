// Conversions between etcd's protobuf messages and Tessera's plain etcd types, and gRPC status
// classification (see etcd_internal.h).
#include "coord/etcd_internal.h"

namespace tessera::etcd {

bool IsTransient(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return true;
    case grpc::StatusCode::UNKNOWN:
      // etcd reports some leader-election hiccups as Unknown.
      return s.error_message().find("leader changed") != std::string::npos ||
             s.error_message().find("no leader") != std::string::npos ||
             s.error_message().find("timed out") != std::string::npos;
    default:
      return false;
  }
}

bool IsAuthTokenError(const grpc::Status& s) {
  return s.error_message().find("invalid auth token") != std::string::npos ||
         (s.error_code() == grpc::StatusCode::UNAUTHENTICATED &&
          s.error_message().find("token") != std::string::npos);
}

Status FromGrpc(const grpc::Status& s, const std::string& what, const std::string& endpoint) {
  auto code = static_cast<StatusCode>(s.error_code());
  if (s.error_code() == grpc::StatusCode::UNKNOWN && IsTransient(s)) code = StatusCode::kUnavailable;
  return Status(code, "etcd " + endpoint + ": " + what + ": " + s.error_message());
}

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

void ToProto(const std::string& key, const GetOptions& o, etcdserverpb::RangeRequest* req) {
  req->set_key(key);
  if (o.prefix) req->set_range_end(PrefixEnd(key));
  req->set_revision(o.revision);
  req->set_limit(o.limit);
  req->set_keys_only(o.keys_only);
  req->set_count_only(o.count_only);
  req->set_max_create_revision(o.max_create_revision);
  switch (o.sort) {
    case GetOptions::Sort::kNone:
      break;
    case GetOptions::Sort::kKeyAscend:
      req->set_sort_order(etcdserverpb::RangeRequest::ASCEND);
      req->set_sort_target(etcdserverpb::RangeRequest::KEY);
      break;
    case GetOptions::Sort::kCreateAscend:
      req->set_sort_order(etcdserverpb::RangeRequest::ASCEND);
      req->set_sort_target(etcdserverpb::RangeRequest::CREATE);
      break;
    case GetOptions::Sort::kCreateDescend:
      req->set_sort_order(etcdserverpb::RangeRequest::DESCEND);
      req->set_sort_target(etcdserverpb::RangeRequest::CREATE);
      break;
  }
}

RangeResult FromProto(const etcdserverpb::RangeResponse& resp) {
  RangeResult out;
  out.revision = resp.header().revision();
  out.more = resp.more();
  out.count = resp.count();
  out.kvs.reserve(resp.kvs_size());
  for (const auto& kv : resp.kvs()) out.kvs.push_back(FromProto(kv));
  return out;
}

static void ToProto(const Compare& c, etcdserverpb::Compare* out) {
  using PC = etcdserverpb::Compare;
  switch (c.result) {
    case Compare::Result::kEqual:
      out->set_result(PC::EQUAL);
      break;
    case Compare::Result::kGreater:
      out->set_result(PC::GREATER);
      break;
    case Compare::Result::kLess:
      out->set_result(PC::LESS);
      break;
    case Compare::Result::kNotEqual:
      out->set_result(PC::NOT_EQUAL);
      break;
  }
  out->set_key(c.key);
  if (!c.range_end.empty()) out->set_range_end(c.range_end);
  switch (c.target) {
    case Compare::Target::kVersion:
      out->set_target(PC::VERSION);
      out->set_version(c.number);
      break;
    case Compare::Target::kCreateRevision:
      out->set_target(PC::CREATE);
      out->set_create_revision(c.number);
      break;
    case Compare::Target::kModRevision:
      out->set_target(PC::MOD);
      out->set_mod_revision(c.number);
      break;
    case Compare::Target::kValue:
      out->set_target(PC::VALUE);
      out->set_value(c.value);
      break;
    case Compare::Target::kLease:
      out->set_target(PC::LEASE);
      out->set_lease(c.number);
      break;
  }
}

static void ToProto(const Op& op, etcdserverpb::RequestOp* out) {
  switch (op.kind) {
    case Op::Kind::kGet:
      ToProto(op.key, op.get, out->mutable_request_range());
      break;
    case Op::Kind::kPut: {
      auto* put = out->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case Op::Kind::kDelete: {
      auto* del = out->mutable_request_delete_range();
      del->set_key(op.key);
      if (op.prefix) del->set_range_end(PrefixEnd(op.key));
      break;
    }
    case Op::Kind::kTxn:
      ToProto(*op.txn, out->mutable_request_txn());
      break;
  }
}

void ToProto(const Txn& txn, etcdserverpb::TxnRequest* req) {
  for (const auto& c : txn.compares) ToProto(c, req->add_compare());
  for (const auto& op : txn.success) ToProto(op, req->add_success());
  for (const auto& op : txn.failure) ToProto(op, req->add_failure());
}

TxnResult FromProto(const etcdserverpb::TxnResponse& resp) {
  TxnResult out;
  out.succeeded = resp.succeeded();
  out.revision = resp.header().revision();
  for (const auto& r : resp.responses()) {
    OpResult res;
    switch (r.response_case()) {
      case etcdserverpb::ResponseOp::kResponseRange:
        res.kind = Op::Kind::kGet;
        res.range = FromProto(r.response_range());
        break;
      case etcdserverpb::ResponseOp::kResponsePut:
        res.kind = Op::Kind::kPut;
        break;
      case etcdserverpb::ResponseOp::kResponseDeleteRange:
        res.kind = Op::Kind::kDelete;
        res.deleted = r.response_delete_range().deleted();
        break;
      case etcdserverpb::ResponseOp::kResponseTxn:
        res.kind = Op::Kind::kTxn;
        res.txn = std::make_shared<TxnResult>(FromProto(r.response_txn()));
        break;
      default:
        break;
    }
    out.results.push_back(std::move(res));
  }
  return out;
}

}  // namespace tessera::etcd
