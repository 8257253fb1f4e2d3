// PushWidener (see push_widener.h).
#include "pserver/push_widener.h"

#include <algorithm>

#include "common/finite.h"
#include "job/wire_codec.h"

namespace tessera {

PushWidener& PushWidener::ForThisThread() {
  thread_local PushWidener widener;
  return widener;
}

bool PushWidener::Begin(std::string_view header, size_t payload_bytes) {
  watching_ = false;
  if (payload_bytes < kMinBytes) return false;
  wire::DataRequest req;
  if (!req.ParseFromArray(header.data(), static_cast<int>(header.size())) ||
      req.op() != wire::DataRequest::DATA || req.push_size() == 0)
    return false;
  const wire::DType t = req.push(0).dtype();
  if (t != wire::BFLOAT16 && t != wire::FLOAT16) return false;
  // The values the segments say (a sparse one's rows need the table's width: the payload's size
  // stands for them, checked against the list under the lock before the floats are taken).
  for (const wire::Segment& s : req.push()) {
    if (s.coding() != wire::PLAIN || s.dtype() != t) return false;
  }
  if (payload_bytes % ValueBytes(t) != 0) return false;
  dtype_ = t;
  bytes_ = payload_bytes;
  done_ = 0;
  nonfinite_ = -1;
  floats_.resize(payload_bytes / ValueBytes(t) * sizeof(float));
  watching_ = true;
  return true;
}

void PushWidener::Arrived(const char* payload, size_t bytes) {
  if (!watching_) return;
  const size_t width = ValueBytes(dtype_);
  const size_t from = done_ / width, to = std::min(bytes, bytes_) / width;
  if (to <= from) return;
  float* out = reinterpret_cast<float*>(floats_.data());
  WidenValues(payload + done_, to - from, dtype_, out + from);
  if (nonfinite_ < 0) {
    const int64_t bad = FirstNonFinite(out + from, to - from);
    if (bad >= 0) nonfinite_ = static_cast<int64_t>(from) + bad;
  }
  done_ = to * width;
}

bool PushWidener::Take(size_t payload_bytes) {
  const bool whole = watching_ && payload_bytes == bytes_ && done_ == bytes_;
  watching_ = false;
  return whole;
}

}  // namespace tessera
