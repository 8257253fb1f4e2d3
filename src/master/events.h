// The events that change a master's TaskQueue, as written to the state log: encoding, and
// replay onto a restored queue (which checks that the replay reproduces the same dispatches).
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "master/task_queue.h"
#include "tessera/status.h"

namespace tessera::master {

struct Event {
  enum class Type : uint8_t {
    kDispatch = 1,
    kFinish = 2,
    kFail = 3,
    kExpire = 4,
    kLost = 5,
    kSplit = 6,
    kAddChunks = 7,      // following: chunks appended to the data set
    kStopFollowing = 8,  // following: no more chunks
  };
  Type type = Type::kDispatch;
  std::string trainer;  // dispatch, lost
  int64_t task = 0;     // dispatch (as handed out), finish, fail, expire, split (a work item)
  int64_t epoch = 0;
  std::string reason;                  // fail
  int64_t step = -1;                   // finish: the trainer's step, or -1
  int64_t cut = 0;                     // split: where the item was cut
  int64_t records = 0;                 // split: the records of its task
  std::vector<int64_t> chunk_records;  // add chunks: the new chunks' record counts
};

std::string EncodeEvent(const Event& e);
// A delta holds a count and that many encoded events.
StatusOr<std::vector<Event>> DecodeDelta(const std::string& delta);
// Applies a logged event to `q` at time `now_ms`. DataLoss if a dispatch does not reproduce.
Status Replay(TaskQueue& q, const Event& e, int64_t now_ms);

}  // namespace tessera::master
