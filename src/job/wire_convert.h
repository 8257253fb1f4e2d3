// Conversions between Tessera's parameter configs and their wire (protobuf) form, shared by
// the trainer client and the pserver. Pure functions.
#pragma once

#include "tessera/data.pb.h"
#include "tessera/params.h"
#include "tessera/status.h"

namespace tessera {

wire::OptimizerSpec ToWire(const OptimizerConfig& c);
StatusOr<OptimizerConfig> FromWire(const wire::OptimizerSpec& s);
wire::InitializerSpec ToWire(const InitializerConfig& c);
StatusOr<InitializerConfig> FromWire(const wire::InitializerSpec& s);
wire::TableLimitsSpec ToWire(const TableLimits& l);
StatusOr<TableLimits> FromWire(const wire::TableLimitsSpec& s);

// A Status carried in a reply (code + message).
inline Status ReplyStatus(const wire::DataReply& r) {
  return r.code() == 0 ? Status::OK() : Status(static_cast<StatusCode>(r.code()), r.message());
}

}  // namespace tessera
