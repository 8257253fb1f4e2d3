// Master events (see events.h).
#include "master/events.h"

#include "common/bytes.h"

namespace tessera::master {

std::string EncodeEvent(const Event& e) {
  std::string out;
  ByteWriter w(&out);
  w.PutVarint(static_cast<uint64_t>(e.type));
  w.PutString(e.trainer);
  w.PutVarint(static_cast<uint64_t>(e.task));
  w.PutVarint(static_cast<uint64_t>(e.epoch));
  w.PutString(e.reason);
  w.PutVarint(static_cast<uint64_t>(e.step + 1));  // added later: older events end before it
  w.PutVarint(static_cast<uint64_t>(e.cut));       // added with splits: older events end before
  w.PutVarint(static_cast<uint64_t>(e.records));
  w.PutVarint(e.chunk_records.size());  // added with following: older events end before
  for (int64_t r : e.chunk_records) w.PutVarint(static_cast<uint64_t>(r));
  return out;
}

StatusOr<std::vector<Event>> DecodeDelta(const std::string& delta) {
  ByteReader r(delta);
  uint64_t n;
  if (!r.GetVarint(&n) || n > delta.size()) return Status::DataLoss("master state delta: bad event count");
  std::vector<Event> out;
  for (uint64_t i = 0; i < n; ++i) {
    std::string one;
    if (!r.GetString(&one)) return Status::DataLoss("master state delta: truncated");
    ByteReader er(one);
    uint64_t type, task, epoch, cut = 0, records = 0;
    Event e;
    if (!er.GetVarint(&type) || type < 1 || type > 8 || !er.GetString(&e.trainer) || !er.GetVarint(&task) ||
        !er.GetVarint(&epoch) || !er.GetString(&e.reason)) {
      return Status::DataLoss("master state delta: bad event " + std::to_string(i));
    }
    uint64_t step_plus_one = 0;
    if (!er.done() && !er.GetVarint(&step_plus_one)) {
      return Status::DataLoss("master state delta: bad step in event " + std::to_string(i));
    }
    if (!er.done() && (!er.GetVarint(&cut) || !er.GetVarint(&records))) {
      return Status::DataLoss("master state delta: bad split in event " + std::to_string(i));
    }
    uint64_t added = 0;
    if (!er.done() && (!er.GetVarint(&added) || added > one.size()))
      return Status::DataLoss("master state delta: bad chunks in event " + std::to_string(i));
    for (uint64_t c = 0; c < added; ++c) {
      uint64_t records;
      if (!er.GetVarint(&records))
        return Status::DataLoss("master state delta: bad chunk in event " + std::to_string(i));
      e.chunk_records.push_back(static_cast<int64_t>(records));
    }
    e.step = static_cast<int64_t>(step_plus_one) - 1;
    e.cut = static_cast<int64_t>(cut);
    e.records = static_cast<int64_t>(records);
    e.type = static_cast<Event::Type>(type);
    e.task = static_cast<int64_t>(task);
    e.epoch = static_cast<int64_t>(epoch);
    out.push_back(std::move(e));
  }
  return out;
}

Status Replay(TaskQueue& q, const Event& e, int64_t now_ms) {
  switch (e.type) {
    case Event::Type::kDispatch: {
      auto n = q.Dispatch(e.trainer, now_ms);
      if (n.kind != TaskQueue::NextKind::kTask || n.task.task != e.task || n.task.epoch != e.epoch) {
        return Status::DataLoss("master state replay diverged: logged dispatch of task " +
                                std::to_string(e.task) + " epoch " + std::to_string(e.epoch) +
                                " did not reproduce");
      }
      return Status::OK();
    }
    case Event::Type::kFinish:
      (void)q.Finish(e.task, e.epoch, e.step);
      return Status::OK();
    case Event::Type::kFail:
      (void)q.Fail(e.task, e.epoch, e.reason);
      return Status::OK();
    case Event::Type::kExpire:
      (void)q.Expire(e.task, e.epoch);
      return Status::OK();
    case Event::Type::kLost:
      (void)q.TrainerLost(e.trainer);
      return Status::OK();
    case Event::Type::kSplit:
      if (q.Split(e.task, e.epoch, e.cut, e.records) < 0) {
        return Status::DataLoss("master state replay diverged: logged split of task " +
                                std::to_string(e.task) + " at record " + std::to_string(e.cut) +
                                " did not reproduce");
      }
      return Status::OK();
    case Event::Type::kAddChunks:
      return q.AddChunks(e.chunk_records).WithContext("master state replay of added chunks");
    case Event::Type::kStopFollowing:
      q.StopFollowing();
      return Status::OK();
  }
  return Status::DataLoss("unknown master event");
}

}  // namespace tessera::master
