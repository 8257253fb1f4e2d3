// AlignedBuffer: a growable, 64-byte-aligned byte buffer that keeps its memory between uses, for
// the data plane's receive and reply buffers (no allocation per message once it has grown to the
// largest message seen).
//
// Memory goes back to the system the moment a buffer is destroyed or released: buffers of 1 MiB
// and more are mapped pages of their own (mmap, grown with mremap) rather than heap memory, which
// the allocator would keep in the per-thread arenas of the connection threads (a pserver given
// many connections that each started a large frame and vanished grew by ~10 MB per connection).
// Not thread-safe (one owner).
#pragma once

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace tessera {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer() { Release(); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

  // Makes room for `n` bytes, keeping the first `keep` bytes. Grows at least geometrically, so
  // a buffer that follows the bytes that arrive is copied O(log n) times (mapped buffers are
  // moved by the kernel, not copied). Throws std::bad_alloc when memory is exhausted.
  void Reserve(size_t n, size_t keep = 0) {
    if (n <= capacity_) return;
    size_t cap = capacity_ < 4096 ? 4096 : capacity_;
    while (cap < n) cap = cap > (SIZE_MAX / 2) ? n : cap * 2;
    if (cap > n && cap - n > (size_t{256} << 20)) cap = n;  // no doubling far past what is needed
    cap = (cap + kPage - 1) & ~(kPage - 1);
    if (cap >= kMapped) {
      void* p;
      if (mapped_) {
        p = ::mremap(data_, capacity_, cap, MREMAP_MAYMOVE);
      } else {
        p = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED && keep) std::memcpy(p, data_, keep);
      }
      if (p == MAP_FAILED) throw std::bad_alloc();
      if (!mapped_) std::free(data_);
      data_ = static_cast<char*>(p);  // page-aligned
      mapped_ = true;
    } else {
      char* p = static_cast<char*>(std::aligned_alloc(64, cap));
      if (!p) throw std::bad_alloc();
      if (keep) std::memcpy(p, data_, keep);
      std::free(data_);
      data_ = p;
    }
    capacity_ = cap;
  }

  // Gives the memory back; the buffer is empty and can grow again.
  void Release() {
    if (mapped_) {
      ::munmap(data_, capacity_);
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    capacity_ = 0;
    mapped_ = false;
  }

 private:
  static constexpr size_t kPage = 4096;
  static constexpr size_t kMapped = size_t{1} << 20;  // from here on, pages of its own
  char* data_ = nullptr;
  size_t capacity_ = 0;
  bool mapped_ = false;
};

}  // namespace tessera
