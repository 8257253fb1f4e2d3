// ByteWriter / ByteReader: little building blocks for compact binary encodings (varints,
// length-prefixed strings, bitmaps), used by RecordIO records and the master's state
// snapshots. Reading never runs past the end: every Get returns false instead.
// Not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}
  void PutVarint(uint64_t v) {
    while (v >= 0x80) {
      out_->push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_->push_back(static_cast<char>(v));
  }
  void PutSigned(int64_t v) { PutVarint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void PutString(std::string_view s) {
    PutVarint(s.size());
    out_->append(s);
  }
  void PutBits(const std::vector<bool>& bits) {
    PutVarint(bits.size());
    uint8_t byte = 0;
    for (size_t i = 0; i < bits.size(); ++i) {
      if (bits[i]) byte |= static_cast<uint8_t>(1u << (i % 8));
      if (i % 8 == 7) {
        out_->push_back(static_cast<char>(byte));
        byte = 0;
      }
    }
    if (bits.size() % 8) out_->push_back(static_cast<char>(byte));
  }

 private:
  std::string* out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  bool GetVarint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64 && pos_ < in_.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(in_[pos_++]);
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  bool GetSigned(int64_t* v) {
    uint64_t u;
    if (!GetVarint(&u)) return false;
    *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
    return true;
  }
  bool GetString(std::string* s) {
    uint64_t n;
    if (!GetVarint(&n) || n > in_.size() - pos_) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  // Like GetString, but a view into the input.
  bool GetView(std::string_view* s) {
    uint64_t n;
    if (!GetVarint(&n) || n > in_.size() - pos_) return false;
    *s = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool GetBits(std::vector<bool>* bits, uint64_t max_bits) {
    uint64_t n;
    if (!GetVarint(&n) || n > max_bits || (n + 7) / 8 > in_.size() - pos_) return false;
    bits->assign(n, false);
    for (uint64_t i = 0; i < n; ++i) (*bits)[i] = (static_cast<uint8_t>(in_[pos_ + i / 8]) >> (i % 8)) & 1;
    pos_ += (n + 7) / 8;
    return true;
  }
  bool done() const { return pos_ == in_.size(); }
  size_t position() const { return pos_; }
  size_t remaining() const { return in_.size() - pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace tessera
