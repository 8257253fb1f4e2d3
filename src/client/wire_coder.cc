// WireCoder (see wire_coder.h).
#include "client/wire_coder.h"

#include <algorithm>
#include <cstring>

#include "job/wire_codec.h"

namespace tessera {
namespace {

// Walks a list of buffers as one run of floats, a segment's worth at a time.
class FloatCursor {
 public:
  template <class Buffer>
  explicit FloatCursor(std::span<const Buffer> bufs) {
    for (const auto& b : bufs) pieces_.push_back({static_cast<const char*>(b.data), b.size});
  }
  // The next n floats: in place when they lie in one buffer, else gathered into `scratch`. Null
  // when fewer are left.
  const float* Next(size_t n, std::vector<float>* scratch) {
    size_t bytes = n * sizeof(float);
    while (at_ < pieces_.size() && off_ == pieces_[at_].second) {
      ++at_;
      off_ = 0;
    }
    if (at_ < pieces_.size() && pieces_[at_].second - off_ >= bytes) {
      const float* p = reinterpret_cast<const float*>(pieces_[at_].first + off_);
      off_ += bytes;
      return p;
    }
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

bool WireCoder::Applies(const LinkCall& call) {
  return std::any_of(call.req.push().begin(), call.req.push().end(), Encoded) ||
         std::any_of(call.req.pull().begin(), call.req.pull().end(), Encoded);
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

Status WireCoder::Encode(LinkCall* call) {
  if (call->wire_encoded) return Status::OK();
  thread_local std::vector<float> scratch;
  FloatCursor in{std::span<const ConstBuffer>(call->payload)};
  call->wire_payload.clear();
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
        seg.set_nonzeros(static_cast<int64_t>(
            EncodeTopK(g, r, n, TopKCount(format_.ratio, n), seg.dtype(), &call->wire_payload)));
        break;
      }
      case wire::SIGNS:
        EncodeSigns(g, Residual(seg.param()) + seg.block() * block_size_, n, &call->wire_payload);
        break;
      default:
        return Status::InvalidArgument("push: segment '" + seg.param() + "' has an unknown coding");
    }
  }
  size_t reply_bytes = 0;
  for (const auto& seg : call->req.pull()) reply_bytes += Elements(seg) * ValueBytes(seg.dtype());
  call->wire_reply.resize(reply_bytes);
  call->wire_encoded = true;
  return Status::OK();
}

void WireCoder::DecodeReply(LinkCall* call) const {
  const char* in = call->wire_reply.data();
  size_t buf = 0, off = 0;  // where the next value goes: call->reply[buf], byte `off`
  for (const auto& seg : call->req.pull()) {
    size_t n = Elements(seg);
    const size_t vb = ValueBytes(seg.dtype());
    while (n > 0 && buf < call->reply.size()) {
      MutableBuffer& b = call->reply[buf];
      const size_t take = std::min(n, (b.size - off) / sizeof(float));
      WidenValues(in, take, seg.dtype(), reinterpret_cast<float*>(static_cast<char*>(b.data) + off));
      in += take * vb;
      n -= take;
      off += take * sizeof(float);
      if (off >= b.size) {
        ++buf;
        off = 0;
      }
    }
  }
}

}  // namespace tessera
