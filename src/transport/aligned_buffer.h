// AlignedBuffer: a growable, 64-byte-aligned byte buffer that keeps its memory between uses, for
// the data plane's receive and reply buffers (no allocation per message once it has grown to the
// largest message seen). Not thread-safe (one owner).
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>

namespace tessera {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

  // Makes room for `n` bytes, keeping the first `keep` bytes. Grows at least geometrically, so
  // a buffer that follows the bytes that arrive is copied O(log n) times. Throws std::bad_alloc
  // when memory is exhausted.
  void Reserve(size_t n, size_t keep = 0) {
    if (n <= capacity_) return;
    size_t cap = capacity_ < 4096 ? 4096 : capacity_;
    while (cap < n) cap = cap > (SIZE_MAX / 2) ? n : cap * 2;
    if (cap > n && cap - n > (size_t{256} << 20)) cap = n;  // no doubling far past what is needed
    cap = (cap + 63) & ~size_t{63};
    char* p = static_cast<char*>(std::aligned_alloc(64, cap));
    if (!p) throw std::bad_alloc();
    if (keep) std::memcpy(p, data_, keep);
    std::free(data_);
    data_ = p;
    capacity_ = cap;
  }

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace tessera
