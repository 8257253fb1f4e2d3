// Placement: how dense parameters are cut into blocks and where blocks and sparse keys live.
// Pure functions of (name, block or key, slot count); the numbers are part of the protocol:
// every trainer and pserver must compute the same ones.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/hash.h"

namespace tessera {

// A dense parameter of `size` elements cut into blocks of at most `block_size` elements.
struct BlockLayout {
  int64_t size = 0;
  int64_t block_size = 1;

  int64_t blocks() const { return size == 0 ? 0 : (size + block_size - 1) / block_size; }
  int64_t begin(int64_t block) const { return block * block_size; }
  int64_t length(int64_t block) const {
    int64_t end = begin(block) + block_size;
    return (end > size ? size : end) - begin(block);
  }
};

inline int SlotOfBlock(std::string_view param, int64_t block, int slots) {
  return static_cast<int>(HashCombine(Hash64(param, 1), static_cast<uint64_t>(block)) %
                          static_cast<uint64_t>(slots));
}

// The table's part of SlotOfKey: hash it once for a request's many keys.
inline uint64_t TableSlotHash(std::string_view table) { return Hash64(table, 2); }
inline int SlotOfKey(uint64_t table_slot_hash, uint64_t key, int slots) {
  return static_cast<int>(HashCombine(table_slot_hash, Mix64(key)) % static_cast<uint64_t>(slots));
}
inline int SlotOfKey(std::string_view table, uint64_t key, int slots) {
  return SlotOfKey(TableSlotHash(table), key, slots);
}

}  // namespace tessera
