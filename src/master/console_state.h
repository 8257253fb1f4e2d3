// What the web console shows that is not in the task queue: the history of the nodes (alive,
// lost, restarted) and the training cost and evaluation history. Pure (times are passed in);
// not thread-safe (the master's console holds a lock).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::master {

// Nodes of one kind (pservers or trainers) as their registrations come and go.
struct NodeView {
  std::string kind;  // "pserver" or "trainer"
  std::string name;  // index or trainer id
  std::string address;
  std::string info;  // the registration's JSON
  int64_t epoch = 0;
  // "alive", "lost" (its lease expired), "finished" (a trainer that deregistered: it finished,
  // or was stopped), "restarted" (alive again under a new epoch)
  std::string state;
  int64_t since_ms = 0;
  int64_t last_seen_ms = 0;
  int restarts = 0;
  // The last transitions (state, time), oldest first, at most 10: a page that polls sees a
  // short "lost" even after the node is back.
  std::vector<std::pair<std::string, int64_t>> history;
};

class NodeTracker {
 public:
  struct Live {
    std::string name;
    int64_t epoch = 0;
    std::string address;
    std::string info;
  };
  // The registrations of `kind` now. Nodes gone since the last update are "lost", except those in
  // `left` (name -> epoch of the registration that deregistered on purpose), which are "finished".
  // `revision`: the store revision `live` reflects (0: unknown). A list older than one already
  // taken for `kind` is ignored: the watch and the periodic listing both feed updates, and a late
  // watch event must not make a node that is there "lost". Returns whether it was taken.
  bool Update(const std::string& kind, const std::vector<Live>& live, int64_t now_ms,
              const std::map<std::string, int64_t>& left = {}, int64_t revision = 0);
  // The nodes of `kind` that `live` no longer lists (and are not marked gone yet). None when
  // `live` is older (`revision`) than a list already taken: Update would ignore it, and a late
  // watch event lacks the nodes that joined since, which are not departing.
  std::vector<std::string> Departing(const std::string& kind, const std::vector<Live>& live,
                                     int64_t revision = 0) const;
  std::vector<NodeView> Nodes() const;
  bool Known(const std::string& kind, const std::string& name) const;

 private:
  std::map<std::pair<std::string, std::string>, NodeView> nodes_;
  std::map<std::string, int64_t> revision_;  // kind -> the newest revision taken
};

// One point of a cost curve (a trainer's mean cost over the samples of one report), or an
// evaluation result (trainer empty, `metric` set).
struct CostPoint {
  int64_t seq = 0;  // increasing, from 1
  int64_t time_ms = 0;
  std::string trainer;
  int64_t step = 0;
  int pass = 0;
  double cost = 0;
  std::string metric;  // evaluation: "accuracy", "auc", ...
  double value = 0;
};

class CostHistory {
 public:
  explicit CostHistory(size_t capacity = 20000) : capacity_(capacity) {}
  // Appends (the oldest points go beyond the capacity); returns the point's seq.
  int64_t Add(CostPoint p);
  // Whether evaluation `p` is here already: the same metric of the same pass, at the same step,
  // with the same value (a trainer's report sent again, to this master or to the one before it,
  // whose points this one restored).
  bool HasEvaluation(const CostPoint& p) const;
  // Points with seq > `since`, oldest first, at most `limit`.
  std::vector<CostPoint> Since(int64_t since, size_t limit = 5000) const;
  int64_t last_seq() const { return next_seq_ - 1; }
  // Replaces everything with saved points (after a takeover); seqs continue after the last.
  void Restore(std::vector<CostPoint> points);

  static std::string ToJson(const std::vector<CostPoint>& points);
  static StatusOr<std::vector<CostPoint>> FromJson(const std::string& json);

 private:
  size_t capacity_;
  std::deque<CostPoint> points_;
  int64_t next_seq_ = 1;
};

}  // namespace tessera::master
