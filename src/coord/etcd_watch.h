// Watcher: a watch on a key or prefix that survives etcd restarts and endpoint failures.
//
// Each Watcher owns one thread and one gRPC Watch stream. Events reach the callback in revision
// order, each exactly once: after the stream breaks, the watcher reconnects (with backoff, on
// the next endpoint) and resumes from the revision after the last one it delivered. If that
// revision was compacted away, the callback gets a final update whose status is OutOfRange and
// the watch ends; the owner re-reads the state and starts a new watch.
//
// Thread-safety: Cancel(), RequestProgress() and the accessors may be called from any thread
// except the callback's own (Cancel() from the callback would deadlock; it is a bug, caught by a
// check). The destructor cancels.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coord/etcd_client.h"
#include "coord/etcd_types.h"

namespace tessera::etcd {

struct WatchOptions {
  bool prefix = false;          // watch every key that starts with the key
  int64_t start_revision = 0;   // first revision to deliver (0: from now on)
  bool prev_kv = false;         // include the previous value with each event
  bool progress_notify = true;  // let etcd send progress notifications while idle
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;       // for a delete: the key, with mod_revision = the delete's revision
  KeyValue prev_kv;  // when WatchOptions::prev_kv
};

struct WatchUpdate {
  std::vector<WatchEvent> events;  // possibly empty (a progress notification)
  int64_t revision = 0;            // every event up to this revision has been delivered
  Status status;                   // non-OK: the watch has ended and no more updates follow
  int64_t compact_revision = 0;    // with OutOfRange: the oldest revision still available
};

class Watcher {
 public:
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Stops the watch and waits for its thread; no callback runs after it returns.
  void Cancel();
  // Asks etcd for a progress notification (an update with no events and the current revision).
  Status RequestProgress();
  // The revision the watch will resume from after a reconnect.
  int64_t next_revision() const { return next_revision_.load(); }
  // Whether the stream is connected right now.
  bool connected() const { return connected_.load(); }
  // How many times the stream has been (re)established.
  int connects() const { return connects_.load(); }

 private:
  friend class EtcdClient;
  Watcher(EtcdClient* client, std::string key, WatchOptions options,
          std::function<void(const WatchUpdate&)> callback);
  void Run();

  EtcdClient* client_;
  const std::string key_;
  const WatchOptions options_;
  std::function<void(const WatchUpdate&)> callback_;

  std::atomic<int64_t> next_revision_{0};
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> connected_{false};
  std::atomic<int> connects_{0};

  struct Stream;
  std::mutex mu_;  // guards stream_ and is the lock for cv_
  std::shared_ptr<Stream> stream_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace tessera::etcd
