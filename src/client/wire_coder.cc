// WireCoder (see wire_coder.h).
#include "client/wire_coder.h"

#include <algorithm>
#include <cstring>

#include "job/wire_codec.h"
#include "job/wire_convert.h"

namespace tessera {
namespace {

// Walks a list of buffers as one run of floats, a segment's worth at a time.
class FloatCursor {
 public:
  template <class Buffer>
  explicit FloatCursor(std::span<const Buffer> bufs) {
    for (const auto& b : bufs) pieces_.push_back({static_cast<const char*>(b.data), b.size});
  }
  // The next n floats where they lie, if in one buffer; else null, and the cursor stays.
  const float* InPlace(size_t n) {
    const size_t bytes = n * sizeof(float);
    while (at_ < pieces_.size() && off_ == pieces_[at_].second) {
      ++at_;
      off_ = 0;
    }
    if (at_ == pieces_.size() || pieces_[at_].second - off_ < bytes) return nullptr;
    const float* p = reinterpret_cast<const float*>(pieces_[at_].first + off_);
    off_ += bytes;
    return p;
  }
  // The next n floats: in place when they lie in one buffer, else gathered into `scratch`. Null
  // when fewer are left.
  const float* Next(size_t n, std::vector<float>* scratch) {
    if (const float* p = InPlace(n)) return p;
    size_t bytes = n * sizeof(float);
    scratch->resize(n);
    char* out = reinterpret_cast<char*>(scratch->data());
    while (bytes > 0) {
      if (at_ >= pieces_.size()) return nullptr;
      const size_t take = std::min(bytes, pieces_[at_].second - off_);
      std::memcpy(out, pieces_[at_].first + off_, take);
      out += take;
      bytes -= take;
      off_ += take;
      if (off_ == pieces_[at_].second) {
        ++at_;
        off_ = 0;
      }
    }
    return scratch->data();
  }

 private:
  std::vector<std::pair<const char*, size_t>> pieces_;
  size_t at_ = 0, off_ = 0;
};

}  // namespace

bool WireCoder::Applies(const LinkCall& call) const {
  if (call.req.op() != wire::DataRequest::DATA) return false;
  if (std::any_of(call.req.pull().begin(), call.req.pull().end(), [&](const wire::Segment& s) {
        return s.block() >= 0 && format_.For(s.param()).error_feedback();  // a pull of changes
      }))
    return true;
  return std::any_of(call.req.push().begin(), call.req.push().end(), Encoded) ||
         std::any_of(call.req.pull().begin(), call.req.pull().end(), Encoded);
}

uint64_t WireCoder::Token(const wire::Segment& s) {
  MutexLock lock(&mu_);
  auto it = tokens_.find({s.param(), s.block()});
  return it == tokens_.end() ? 0 : it->second;
}

void WireCoder::SetToken(const wire::Segment& s, uint64_t token) {
  MutexLock lock(&mu_);
  tokens_[{s.param(), s.block()}] = token;
}

size_t WireCoder::Elements(const wire::Segment& s) const {
  if (s.block() >= 0) return static_cast<size_t>(s.count());
  for (const auto& t : builder_.sparse()) {
    if (t.name == s.param()) return static_cast<size_t>(s.count()) * static_cast<size_t>(t.dim);
  }
  return 0;
}

float* WireCoder::Residual(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = residuals_.find(name);
  if (it == residuals_.end()) {
    size_t size = 0;
    for (const auto& d : builder_.dense()) {
      if (d.name == name) size = d.size;
    }
    it = residuals_.emplace(name, std::vector<float>(size, 0.0f)).first;
  }
  return it->second.data();
}

NarrowedPush::NarrowedPush(std::vector<Run> runs, size_t bytes)
    : runs_(std::move(runs)), out_(std::make_unique_for_overwrite<char[]>(bytes)), bytes_(bytes) {}

void NarrowedPush::Fill(size_t bytes) {
  bytes = std::min(bytes, bytes_);
  // Bounded by the runs: each turn ends one, or reaches `bytes`.
  while (made_ < bytes && run_ < runs_.size()) {
    const Run& r = runs_[run_];
    const size_t width = ValueBytes(r.dtype);
    const size_t from = (made_ - r.at) / width;
    const size_t to = std::min(r.n, (bytes - r.at + width - 1) / width);
    NarrowValues({r.from + from, to - from}, r.dtype, out_.get() + made_);
    made_ = r.at + to * width;
    if (to == r.n) ++run_;
  }
}

std::shared_ptr<NarrowedPush> WireCoder::Streamed(const LinkCall& call) const {
  std::vector<NarrowedPush::Run> runs;
  FloatCursor in{std::span<const ConstBuffer>(call.payload)};
  size_t at = 0;
  for (const wire::Segment& seg : call.req.push()) {
    const size_t width = ValueBytes(seg.dtype());
    if (seg.coding() != wire::PLAIN || width == 0) return nullptr;
    const size_t n = Elements(seg);
    if (n == 0) continue;
    const float* g = in.InPlace(n);  // its gradients in one buffer, or encoded at once
    if (g == nullptr) return nullptr;
    runs.push_back({g, n, seg.dtype(), at});
    at += n * width;
  }
  return std::make_shared<NarrowedPush>(std::move(runs), at);
}

Status WireCoder::Encode(LinkCall* call) {
  if (call->wire_encoded) return Status::OK();
  call->wire_payload.clear();
  call->wire_stream = Streamed(*call);
  if (!call->wire_stream) TESSERA_RETURN_IF_ERROR(EncodeAtOnce(call));
  size_t reply_bytes = 0;  // the most it may be: every value
  for (wire::Segment& seg : *call->req.mutable_pull()) {
    reply_bytes += Elements(seg) * ValueBytes(seg.dtype());
    if (seg.block() >= 0 && format_.For(seg.param()).error_feedback()) seg.set_since(Token(seg));
  }
  call->wire_reply_bytes = reply_bytes;
  call->wire_encoded = true;
  return Status::OK();
}

Status WireCoder::EncodeAtOnce(LinkCall* call) {
  thread_local std::vector<float> scratch;
  FloatCursor in{std::span<const ConstBuffer>(call->payload)};
  // Room for the most the push may take, at once: grown segment by segment, a push of tens of
  // MB was copied over and over as the string doubled.
  // (A TOP_K segment's size depends on the elements it sends, not known yet: at most k.)
  size_t most = 0;
  for (const wire::Segment& seg : call->req.push()) {
    const size_t n = Elements(seg);
    if (seg.coding() == wire::TOP_K) {
      most += TopKCount(format_.For(seg.param()).ratio, n) * (sizeof(uint32_t) + ValueBytes(seg.dtype()));
    } else if (auto b = SegmentWireBytes(seg, n); b.ok()) {
      most += *b;
    }
  }
  call->wire_payload.reserve(most);
  for (wire::Segment& seg : *call->req.mutable_push()) {
    const size_t n = Elements(seg);
    const float* g = in.Next(n, &scratch);
    if (g == nullptr) {
      return Status::InvalidArgument("push: the gradients end before segment '" + seg.param() + "' (" +
                                     std::to_string(n) + " values)");
    }
    switch (seg.coding()) {
      case wire::PLAIN: {
        const size_t at = call->wire_payload.size();
        call->wire_payload.resize(at + n * ValueBytes(seg.dtype()));
        NarrowValues({g, n}, seg.dtype(), call->wire_payload.data() + at);
        break;
      }
      case wire::TOP_K: {
        float* r = Residual(seg.param()) + seg.block() * block_size_;
        seg.set_nonzeros(static_cast<int64_t>(EncodeTopK(
            g, r, n, TopKCount(format_.For(seg.param()).ratio, n), seg.dtype(), &call->wire_payload)));
        break;
      }
      case wire::SIGNS:
        EncodeSigns(g, Residual(seg.param()) + seg.block() * block_size_, n, &call->wire_payload);
        break;
      default:
        return Status::InvalidArgument("push: segment '" + seg.param() + "' has an unknown coding");
    }
  }
  return Status::OK();
}

Status WireCoder::CheckReply(const LinkCall& call, const wire::DataReply& reply, size_t bytes) const {
  const auto& asked = call.req.pull();
  const auto& said = reply.pull();
  if (said.size() != asked.size()) {
    return Status::DataLoss("the reply lists " + std::to_string(said.size()) + " segments for a pull of " +
                            std::to_string(asked.size()));
  }
  size_t need = 0;
  for (int i = 0; i < said.size(); ++i) {
    const wire::Segment& s = said[i];
    if (s.param() != asked[i].param() || s.block() != asked[i].block() || s.count() != asked[i].count() ||
        (s.coding() != wire::PLAIN && (s.coding() != wire::TOP_K || s.block() < 0))) {
      return Status::DataLoss("the reply's segment " + std::to_string(i) + " is not the one pulled ('" +
                              asked[i].param() + "')");
    }
    auto b = SegmentWireBytes(s, Elements(s));
    if (!b.ok())
      return Status::DataLoss("the reply's segment " + std::to_string(i) + ": " + b.status().message());
    need += *b;
  }
  if (need != bytes) {
    return Status::DataLoss("the reply has " + std::to_string(bytes) +
                            " payload bytes, its segments describe " + std::to_string(need));
  }
  return Status::OK();
}

void WireCoder::ReplyDecoder::Reset() {
  told_.Clear();
  reply_ = nullptr;
  bytes_ = 0;
  status_ = Status::OK();
  decoded_to_ = 0;
  segment_ = 0;
  segment_at_ = 0;
  done_ = 0;
  buf_ = off_ = 0;
}

void WireCoder::ReplyDecoder::Begin(std::string_view header, size_t payload_bytes) {
  Reset();
  if (!told_.ParseFromArray(header.data(), static_cast<int>(header.size())) || !ReplyStatus(told_).ok() ||
      payload_bytes == 0) {
    return;  // an error, or no values: RunOn sees it once the call returns
  }
  reply_ = &told_;
  bytes_ = payload_bytes;
  status_ = coder_->CheckReply(*call_, told_, payload_bytes);
}

void WireCoder::ReplyDecoder::Arrived(size_t bytes) {
  // Every 256 KiB, and at the end: each run widened while the next bytes arrive.
  constexpr size_t kStride = 256 << 10;
  if (reply_ == nullptr || !status_.ok() || (bytes < bytes_ && bytes - decoded_to_ < kStride)) return;
  status_ = Advance(std::min(bytes, bytes_));
}

Status WireCoder::ReplyDecoder::Finish(const wire::DataReply& reply, size_t bytes) {
  if (reply_ == nullptr || bytes != bytes_) {
    // Not told as it came (another transport, or no watcher): all of it now.
    Reset();
    reply_ = &reply;
    bytes_ = bytes;
    status_ = coder_->CheckReply(*call_, reply, bytes);
  }
  if (!status_.ok()) return status_;
  return status_ = Advance(bytes);
}

Status WireCoder::ReplyDecoder::Advance(size_t avail) {
  const auto& said = reply_->pull();
  std::vector<MutableBuffer>& out = call_->reply;
  while (segment_ < said.size()) {
    const wire::Segment& s = said[segment_];
    const size_t n = coder_->Elements(s);
    const size_t vb = ValueBytes(s.dtype());
    const char* in = in_ + segment_at_;
    if (s.coding() == wire::TOP_K) {
      // Changes: the block's values as held, with the elements sent replaced, once all of them
      // have come. A dense block is one reply buffer (RequestBuilder).
      const auto k = static_cast<size_t>(s.nonzeros());
      if (segment_at_ + k * (sizeof(uint32_t) + vb) > avail) break;
      if (buf_ >= out.size() || off_ != 0 || out[buf_].size != n * sizeof(float)) {
        return Status::DataLoss("a reply of changes to '" + s.param() + "' does not match its buffer");
      }
      auto* values = static_cast<float*>(out[buf_].data);
      const char* v = in + k * sizeof(uint32_t);
      for (size_t j = 0; j < k; ++j) {
        uint32_t at;
        std::memcpy(&at, in + j * sizeof at, sizeof at);
        if (at >= n) return Status::DataLoss("a change to '" + s.param() + "' is past its block");
        WidenValues(v + j * vb, 1, s.dtype(), values + at);
      }
      segment_at_ += k * (sizeof(uint32_t) + vb);
      ++buf_;
    } else {
      // Values: as many as have come.
      const size_t upto = std::min(n, (avail - segment_at_) / vb);
      while (done_ < upto && buf_ < out.size()) {
        MutableBuffer& b = out[buf_];
        const size_t take = std::min(upto - done_, (b.size - off_) / sizeof(float));
        WidenValues(in + done_ * vb, take, s.dtype(),
                    reinterpret_cast<float*>(static_cast<char*>(b.data) + off_));
        done_ += take;
        off_ += take * sizeof(float);
        if (off_ >= b.size) {
          ++buf_;
          off_ = 0;
        }
      }
      if (upto < n) break;
      segment_at_ += n * vb;
      done_ = 0;
    }
    if (s.block() >= 0 && s.since() != 0) coder_->SetToken(s, s.since());
    ++segment_;
  }
  decoded_to_ = avail;
  return Status::OK();
}

}  // namespace tessera
