// The members of a registry prefix (coord/registry.h) and the changes a watch of them sees; and
// MemberEpochs, which follows those changes to tell who left (pure).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera {

struct Member {
  std::string name;   // the key's last element: "0", "trainer-3", ...
  std::string key;    // the full key
  std::string value;  // what the member registered (JSON by convention)
  int64_t epoch = 0;  // create revision of the key
  int64_t lease = 0;
};

// The order of members: numeric names by number, before the others by string.
bool MemberNameLess(const std::string& a, const std::string& b);

struct MemberList {
  std::vector<Member> members;                        // sorted by MemberNameLess
  int64_t revision = 0;                               // the store revision this list reflects
  const Member* Find(const std::string& name) const;  // O(log N)
};

// One change of a watched prefix: a member put (registered, or its value replaced; a new epoch
// means the key was deleted and created again) or removed (only its name and key are set).
struct MemberChange {
  bool removed = false;
  Member member;
};

// What a watch saw since its last call, in order. `relisted`: the prefix was read whole (the
// watch started, or restarted after a compaction or a lost connection): `changes` puts every
// member, and a member not among them is gone.
struct MemberChanges {
  bool relisted = false;
  std::vector<MemberChange> changes;
  int64_t revision = 0;
};

// The epoch of each member, kept from a watch's changes at O(1) a change (a relist costs O(N)).
class MemberEpochs {
 public:
  struct Left {
    std::string name;
    int64_t epoch = 0;
  };
  // Applies `c`. Returns the members that left, with the epoch they had: removed, put again
  // with a new epoch, or (on a relist) not listed any more; in the order seen.
  std::vector<Left> Apply(const MemberChanges& c);
  size_t size() const { return epochs_.size(); }
  // The epoch of member `name`, or 0.
  int64_t EpochOf(const std::string& name) const;

 private:
  std::unordered_map<std::string, int64_t> epochs_;
};

}  // namespace tessera
