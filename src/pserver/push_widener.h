// PushWidener: a push in half precision widened into float32 as its bytes come over tcp (the
// transport's RequestWatcher), and scanned for non-finite values on the way. The push that closed
// a sync step used to be widened and scanned after its last byte, under the pserver's lock: on the
// 26 M model at 1 Gbit/s, 16-21 ms of the step's path for 27.6 MB. Now that is done while the
// bytes come, and the step's barrier only checks that the request's segment list agrees.
//
// Only a push whose every segment is plain values of one half-precision type, dense or sparse:
// widened value by value, the payload is what SegmentList::Widen makes of it (the service takes
// the floats only when the list it reads under its lock says so: SegmentList::PlainOf). Anything
// else (a coded push, a small one, a request without a push) is not watched and is widened as
// before. Pure: no locks, threads or I/O; one per connection thread (ForThisThread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/data.pb.h"
#include "transport/transport.h"

namespace tessera {

class PushWidener : public RequestWatcher {
 public:
  // Pushes below this are widened after they came: the header is not read twice for them.
  static constexpr size_t kMinBytes = size_t{1} << 20;

  // This thread's widener (the transport's connection thread calls Watch, Arrived and Handle).
  static PushWidener& ForThisThread();

  // A request with `header` (a serialized DataRequest) and `payload_bytes` is coming: whether its
  // push is widened as it comes. Forgets the request before.
  bool Begin(std::string_view header, size_t payload_bytes);
  // Widens the values whose bytes are all among the first `bytes` at `payload`.
  void Arrived(const char* payload, size_t bytes) override;
  // The request now handled, of `payload_bytes`: its push widened whole into floats() (its values
  // of type dtype()), with the first non-finite one at first_nonfinite() (-1: none). Once: the
  // widener then forgets it (false for any later request until the next Begin).
  bool Take(size_t payload_bytes);
  wire::DType dtype() const { return dtype_; }
  std::string* floats() { return &floats_; }
  int64_t first_nonfinite() const { return nonfinite_; }

 private:
  bool watching_ = false;
  wire::DType dtype_ = wire::FLOAT32;
  size_t bytes_ = 0;  // the payload's
  size_t done_ = 0;   // bytes widened, whole values
  int64_t nonfinite_ = -1;
  std::string floats_;  // grown once per thread; handed to a held push and back (HeldPushes)
};

}  // namespace tessera
