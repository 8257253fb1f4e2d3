// WireCoder: the trainer's side of a job's wire format (job/wire_format.h). A link hands it each
// call whose segments the RequestBuilder made in the format: it encodes the push (half precision,
// top-k or signs) from the caller's float32 gradients into bytes the call keeps, so a retried call
// sends the same bytes and the error feedback counts a gradient once; and it widens a pull's reply
// (half precision) into the caller's value buffers. It keeps the error feedback: per dense
// parameter, what earlier pushes did not send, added to the next push of the same elements. With
// top-k or sign pushes it also asks pulls for the changes since the values it holds (each dense
// block's token from its last reply), and applies a reply of changes to them.
//
// Thread-safety: links call it from their threads at once; every dense block belongs to one link
// at a time (its pserver), so two calls never encode the same elements together.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/request_builder.h"
#include "common/mutex.h"
#include "job/wire_format.h"
#include "transport/transport.h"

namespace tessera {

// A push whose segments are all plain values (half precision) narrowed as it is sent: each value
// once, when the transport first asks for its bytes (PayloadFiller), into memory of its own that
// nothing zeroes first. A trainer's narrowing of a 26 M model's push then runs while the link
// carries what it made before, not before the first byte leaves. Not thread-safe: one call's.
class NarrowedPush : public PayloadFiller {
 public:
  struct Run {
    const float* from;  // the caller's gradients (they stay put until the call ends)
    size_t n;
    wire::DType dtype;
    size_t at;  // its first byte in the payload; the runs follow one another
  };
  NarrowedPush(std::vector<Run> runs, size_t bytes);
  const char* data() const { return out_.get(); }
  size_t size() const { return bytes_; }
  // Narrows every value with a byte below `bytes` that is not narrowed yet.
  void Fill(size_t bytes) override;

 private:
  std::vector<Run> runs_;
  std::unique_ptr<char[]> out_;
  size_t bytes_;
  size_t made_ = 0;  // bytes narrowed: whole values, runs_[run_] the next
  size_t run_ = 0;
};

class WireCoder {
 public:
  // `builder` declares the parameters (read at each call: declared before the first).
  explicit WireCoder(const RequestBuilder& builder, WireChoice format, int64_t block_size)
      : builder_(builder), format_(format), block_size_(block_size) {}

  // Whether `call` goes through the coder (a DATA request with segments in the format).
  bool Applies(const LinkCall& call) const;
  // Encodes the call's push and sets call->wire_reply_bytes for its pull, once per call (later
  // calls do nothing): a push of plain values into call->wire_stream, narrowed as it is sent; one
  // of top-k or signs (their error feedback must see the whole segment), or whose gradients are
  // not in one buffer a segment, into call->wire_payload at once. InvalidArgument when its
  // payload does not hold the floats its segments describe.
  Status Encode(LinkCall* call);
  // Writes a pull's reply, as its bytes come into `in` (the buffer the call receives its reply
  // into), into the call's reply buffers: widened, or changes applied where it sent changes.
  // Given to the transport with that buffer (MutableBuffer::watcher), it checks the reply from
  // its header, before any value is written (DataLoss when the reply does not match the pull: its
  // segments or their sizes), and widens each value once it has come, while
  // the next ones travel (a 26 M model's replies took 20 ms a call to widen after they had
  // come). One per attempt at the call; Finish after the call writes what is left, or all of it
  // when the transport did not tell.
  class ReplyDecoder : public ReplyWatcher {
   public:
    ReplyDecoder(WireCoder* coder, LinkCall* call, const char* in) : coder_(coder), call_(call), in_(in) {}
    void Begin(std::string_view header, size_t payload_bytes) override;
    void Arrived(size_t bytes) override;
    // After the call returned `reply` with `bytes` of payload: the rest of it, or all of it.
    Status Finish(const wire::DataReply& reply, size_t bytes);

   private:
    void Reset();
    Status Advance(size_t avail);  // writes every value within the first `avail` bytes

    WireCoder* coder_;
    LinkCall* call_;
    const char* in_;
    wire::DataReply told_;                    // the header Begin was told
    const wire::DataReply* reply_ = nullptr;  // what is decoded: told_, or Finish's reply
    size_t bytes_ = 0;                        // its payload
    Status status_;                           // its check, then the first error decoding it
    size_t decoded_to_ = 0;                   // bytes of it written
    int segment_ = 0;                         // the next segment, starting at byte segment_at_
    size_t segment_at_ = 0;
    size_t done_ = 0;           // values of it written
    size_t buf_ = 0, off_ = 0;  // where the next goes: call_->reply[buf_], byte off_
  };

 private:
  // The call's push narrowed as it is sent, when it can be (see Encode); null otherwise.
  std::shared_ptr<NarrowedPush> Streamed(const LinkCall& call) const;
  Status EncodeAtOnce(LinkCall* call);
  // DataLoss unless `reply` answers the call's pull, segment for segment, in `bytes`.
  Status CheckReply(const LinkCall& call, const wire::DataReply& reply, size_t bytes) const;
  // The floats segment `s` stands for (a dense block's count, a sparse segment's rows x dim).
  size_t Elements(const wire::Segment& s) const;
  // Residuals of dense parameter `name` (its size), made zero at first use.
  float* Residual(const std::string& name);

  const RequestBuilder& builder_;
  const WireChoice format_;
  const int64_t block_size_;
  // The token of a dense block's values as last pulled ("" and 0: none).
  uint64_t Token(const wire::Segment& s);
  void SetToken(const wire::Segment& s, uint64_t token);

  Mutex mu_;
  std::unordered_map<std::string, std::vector<float>> residuals_ GUARDED_BY(mu_);
  std::map<std::pair<std::string, int64_t>, uint64_t> tokens_ GUARDED_BY(mu_);
};

}  // namespace tessera
