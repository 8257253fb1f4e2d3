// PserverDirectory: the trainer's live view of a job's pservers, from etcd: each index's address
// and epoch (its registration) and whether it reports itself initialized for that epoch.
// Callers wait on it for a pserver to appear or change, or subscribe to an index's changes (a
// link abandons its calls to a registration that is gone). Thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coord/etcd_client.h"
#include "coord/registry.h"
#include "tessera/status.h"
#include "transport/endpoint_choice.h"

namespace tessera {

struct PserverAddress {
  std::string address;          // the pserver's main address (shown to people)
  int64_t epoch = 0;
  PserverEndpoints endpoints;   // every transport it serves, and its host
};

class PserverDirectory {
 public:
  PserverDirectory(etcd::EtcdClient* etcd, const std::string& job, int pservers);
  ~PserverDirectory();

  // Waits until pserver `index` is registered; with `not_epoch`, until its epoch differs from it.
  // NotFound when it is not registered by the deadline; the current registration when only a
  // newer one did not come.
  StatusOr<PserverAddress> Resolve(int index, const Deadline& deadline, int64_t not_epoch = -1);
  // Whether every pserver is registered and reports itself initialized for its current epoch.
  bool AllReady() const;
  bool Ready(int index) const;
  Status WaitAllRegistered(const Deadline& deadline);
  Status WaitAllReady(const Deadline& deadline);
  // Wakes waiters (e.g. at shutdown).
  void Interrupt();

  // Calls `fn(epoch)` on the watch's thread whenever pserver `index`'s registration changes: a new
  // epoch, or 0 when the registration disappeared. Returns a token for Unsubscribe.
  int Subscribe(int index, std::function<void(int64_t epoch)> fn);
  // After it returns, the subscriber is not running and will not be called.
  void Unsubscribe(int token);

 private:
  void OnPservers(const MemberList& list);
  void OnReady(const MemberList& list);
  bool ReadyLocked(int index) const;

  const int n_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PserverAddress> current_;  // epoch 0: not registered
  std::vector<int64_t> ready_epoch_;     // epoch named in pserver-ready/<i>, 0 if none
  bool interrupted_ = false;
  // Held while subscribers run, so Unsubscribe can wait for a call in progress.
  std::mutex subs_mu_;
  struct Subscriber {
    int token;
    int index;
    std::function<void(int64_t)> fn;
  };
  std::vector<Subscriber> subs_;
  int next_token_ = 1;
  std::unique_ptr<MemberWatch> pserver_watch_;
  std::unique_ptr<MemberWatch> ready_watch_;
};

}  // namespace tessera
