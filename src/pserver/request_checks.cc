// Data request validation (see request_checks.h).
#include "pserver/request_checks.h"

#include <string>

namespace tessera {
namespace {

std::string DTypeName(int t) {
  const std::string& n = wire::DType_Name(static_cast<wire::DType>(t));
  return n.empty() ? "type " + std::to_string(t) : n;
}

Status CheckFloat32(const wire::Segment& seg) {
  if (seg.dtype() == wire::FLOAT32) return Status::OK();
  return Status::InvalidArgument("parameter '" + seg.param() + "': dtype " + DTypeName(seg.dtype()) +
                                 " is not supported (parameters are FLOAT32)");
}

}  // namespace

Status CheckPushSegments(const ShardStore& store, const wire::DataRequest& req, size_t payload_bytes) {
  size_t bytes = 0;
  for (const auto& seg : req.push()) {
    TESSERA_RETURN_IF_ERROR(CheckFloat32(seg));
    if (seg.block() >= 0) {
      TESSERA_RETURN_IF_ERROR(store.CheckDense(seg.param(), seg.block(), seg.count()));
      bytes += static_cast<size_t>(seg.count()) * sizeof(float);
    } else {
      if (seg.keys_size() != seg.count()) {
        return Status::InvalidArgument("sparse segment of '" + seg.param() + "' lists " +
                                       std::to_string(seg.keys_size()) + " keys but says " +
                                       std::to_string(seg.count()) + " rows");
      }
      TESSERA_RETURN_IF_ERROR(store.CheckSparse(seg.param(), SegmentKeys(seg)));
      bytes += static_cast<size_t>(seg.keys_size()) * store.Dim(seg.param()) * sizeof(float);
    }
  }
  if (bytes != payload_bytes) {
    return Status::InvalidArgument("payload has " + std::to_string(payload_bytes) +
                                   " bytes but the header describes " + std::to_string(bytes));
  }
  if (req.is_push() && req.push_size() > 0 && req.samples() < 1) {
    return Status::InvalidArgument("a push with gradients needs a sample count >= 1, got " +
                                   std::to_string(req.samples()));
  }
  return Status::OK();
}

Status CheckPullSegments(const ShardStore& store, const wire::DataRequest& req) {
  for (const auto& seg : req.pull()) {
    TESSERA_RETURN_IF_ERROR(CheckFloat32(seg));
    if (seg.block() >= 0) {
      TESSERA_RETURN_IF_ERROR(store.CheckDense(seg.param(), seg.block(), seg.count()));
    } else {
      TESSERA_RETURN_IF_ERROR(store.CheckSparse(seg.param(), SegmentKeys(seg)));
    }
  }
  return Status::OK();
}

Status NonFiniteGradient(const ShardStore& store, const wire::DataRequest& req, int64_t element) {
  int64_t at = element;
  for (const auto& seg : req.push()) {
    int64_t n = seg.count();
    if (seg.block() < 0) {
      if (!store.IsSparse(seg.param())) break;
      n = static_cast<int64_t>(seg.keys_size()) * store.Dim(seg.param());
    }
    if (at < n) {
      std::string where =
          seg.block() >= 0
              ? "block " + std::to_string(seg.block()) + " element " + std::to_string(at)
              : "row of key " + std::to_string(seg.keys(static_cast<int>(at / store.Dim(seg.param()))));
      return Status::InvalidArgument("gradient for '" + seg.param() + "' " + where +
                                     " is not finite (NaN or infinity); nothing was applied");
    }
    at -= n;
  }
  return Status::InvalidArgument("gradient element " + std::to_string(element) +
                                 " is not finite; nothing was applied");
}

}  // namespace tessera
