// ReplyProgress: where a reply being written in place tells its reader how far it has got. The
// shared-memory transport hands a progress word with the reply buffer of a request answered in
// the trainer's window (MutableBuffer::progress, from WindowDescriptor::progress_offset); the
// pserver's apply, writing new values into that reply, stores the bytes written so far, in order,
// with release semantics, so a trainer may read the first values before the whole reply is there.
// Each reply has its own: an apply at a barrier writes several trainers' replies and tells each.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tessera {

struct ReplyProgress {
  char* base = nullptr;  // the reply room
  size_t room = 0;
  std::atomic<uint64_t>* word = nullptr;

  // Whether `p` (the end of something written) lies in the room, past its start.
  bool Covers(const void* p) const {
    const char* c = static_cast<const char*>(p);
    return word && c > base && c <= base + room;
  }
  // Bytes [base, p) of the room are written, final: the reader may read them.
  void WrittenUpTo(const void* p) const {
    word->store(static_cast<uint64_t>(static_cast<const char*>(p) - base), std::memory_order_release);
  }
};

}  // namespace tessera
