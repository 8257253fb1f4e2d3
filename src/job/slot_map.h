// SlotMap: which pserver index serves each hash slot. Pure; a value type.
// Dense blocks and sparse keys hash onto slots (placement.h); the slot map assigns slots to
// pservers, so changing the number of pservers moves slots and never rehashes keys.
#pragma once

#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera {

class SlotMap {
 public:
  SlotMap() = default;
  // Slot s goes to pserver s % pservers.
  static SlotMap RoundRobin(int slots, int pservers);
  static StatusOr<SlotMap> FromJson(const std::string& json);
  std::string ToJson() const;

  int slots() const { return static_cast<int>(owner_.size()); }
  int pservers() const { return pservers_; }
  // REQUIRES: 0 <= slot < slots()
  int PserverOf(int slot) const { return owner_[slot]; }
  std::vector<int> SlotsOf(int pserver) const;
  // Every slot names a pserver in [0, pservers) and every pserver serves at least one slot.
  Status Validate() const;
  bool operator==(const SlotMap&) const = default;

 private:
  std::vector<int> owner_;
  int pservers_ = 0;
};

}  // namespace tessera
