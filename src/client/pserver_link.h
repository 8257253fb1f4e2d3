// PserverLink: the trainer's connection to one pserver index: a worker thread that runs that
// pserver's requests in order, one at a time (requests to different pservers run concurrently).
// A thread waiting for a request may run it itself if the worker has not started it yet
// (RunInline), which spares two thread hand-offs on the common submit-then-wait path.
// Requests submitted in one overlap group (the parts of one large pull or async push) may run
// two at a time: the second on a lane of its own (a second connection and thread), so one
// travels while the pserver works on the other. Any other request starts only when nothing runs,
// and runs alone; the queue's order is kept for everything but neighbours of one group.
// A request is retried with backoff until its deadline when the transport fails or the pserver
// moved (stale epoch, lease lost, restarted at the same or another address); a pserver that came
// back without state is re-initialized and re-joined through the Owner before the retry. A call
// in progress is abandoned at once when the registration it targets disappears or is replaced
// (a frozen pserver whose lease expired never answers), and retried on the new registration.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "client/client_rules.h"
#include "client/pserver_directory.h"
#include "client/request_builder.h"
#include "common/mutex.h"
#include "transport/transport.h"

namespace tessera {

class PserverLink {
 public:
  // What a link needs from the client to recover a pserver.
  class Owner {
   public:
    virtual ~Owner() = default;
    // Fills the identity fields of a request (job token, trainer, epochs).
    virtual void Stamp(wire::DataRequest* req) = 0;
    // Re-initializes pserver `index` (through `link`) after it restarted without state, at
    // `step`: the step of the request being retried (the trainer's values belong to it).
    virtual Status Reinitialize(PserverLink& link, const Deadline& deadline, int64_t step) = 0;
    // Joins pserver `index`'s consistency group again, from `step`.
    virtual Status Rejoin(PserverLink& link, const Deadline& deadline, int64_t step) = 0;
  };

  // How the link reaches its pserver (shared by every link of a client).
  struct Transport {
    TransportKind wanted = TransportKind::kAuto;
    std::string host_id;  // this process's HostIdentity()
    TransportOptions options;
    // The job's wire format, when it is not float32: calls in it are encoded and decoded here.
    std::shared_ptr<class WireCoder> coder;
  };

  // Called with the outcome; for a refused push (Aborted: the step closed) `resume_step` says
  // where the pserver wants the trainer to continue.
  using Done = std::function<void(const Status&, const wire::DataReply&, int64_t resume_step)>;

  PserverLink(int index, PserverDirectory* directory, Owner* owner, const Transport* transport);
  ~PserverLink();

  int index() const { return index_; }
  // Queues `call`; `done` runs when it has finished (or failed), on the link's thread, its second
  // lane's, or the thread that ran it through RunInline. With `recover`, see Run(). With a
  // `group` (not 0), the call may run beside a neighbouring call of the same group (above); on
  // the second lane it does not recover a pserver itself: a call that needs it is put back to run
  // first, alone, on the link's own lane. Returns the job's id (for RunInline). Without `wake`,
  // no link thread is woken for it: the caller runs it (RunInline) at once; if it cannot (the
  // link is busy), the link's thread takes it after the job ahead of it.
  uint64_t Submit(std::shared_ptr<LinkCall> call, std::chrono::milliseconds timeout, bool recover, Done done,
                  uint64_t group = 0, bool wake = true);
  // Runs job `id` on the calling thread if it is next in line and may start on the link's own
  // lane now; false if a link thread has it or it is not next.
  bool RunInline(uint64_t id);
  // Runs `fn` on the link's thread, after the requests queued before it.
  void Post(std::function<void()> fn);
  // Sends `call` with retries until `deadline`. With `recover`, a pserver that lost its state is
  // re-initialized / re-joined through the Owner first. REQUIRES: on the link's thread (inside
  // a posted function or the Owner's recovery).
  StatusOr<wire::DataReply> Run(LinkCall& call, const Deadline& deadline, bool recover,
                                int64_t* resume_step = nullptr) {
    return RunOn(kMainLane, call, deadline, recover, resume_step, nullptr);
  }
  void Close();
  // The transport of the current connection ("" before the first), e.g. for `tessera status`.
  std::string transport_name() const;

 private:
  static constexpr int kMainLane = 0;    // the link's thread, or a thread in RunInline
  static constexpr int kSecondLane = 1;  // a call beside the main lane's, of the same group
  // A job's body, run on `lane`; false: put the job back at the queue's front, to run on the
  // main lane (a call on the second lane that needs its pserver recovered).
  using JobFn = std::function<bool(int lane)>;
  struct Job {
    uint64_t id = 0;     // 0: only the link thread runs it
    uint64_t group = 0;  // not 0: may run beside a job of the same group
    JobFn fn;
  };
  // One connection to the pserver and what was learned choosing it. Only the thread running the
  // lane writes it (under `mu`, which Supersede takes from the directory's thread).
  struct Lane {
    Mutex mu;
    std::unique_ptr<ClientConnection> conn GUARDED_BY(mu);
    PserverAddress target GUARDED_BY(mu);
    int64_t aborted_epoch GUARDED_BY(mu) = 0;  // the connection to this registration was abandoned
    EndpointChoice chosen;
    int64_t shm_failed_epoch = -1;  // auto: shared memory could not connect to this registration
    std::string coded_reply;        // the runner's: a reply in a wire format, before it is decoded
    // The lane's runner reads conn and target without the lock (it is their only writer).
    ClientConnection* own_conn() const NO_THREAD_SAFETY_ANALYSIS { return conn.get(); }
    const PserverAddress& own_target() const NO_THREAD_SAFETY_ANALYSIS { return target; }
  };

  StatusOr<wire::DataReply> RunOn(int lane, LinkCall& call, const Deadline& deadline, bool recover,
                                  int64_t* resume_step, bool* needs_recovery);
  void Loop(int lane);
  // Whether the queue's front job may start on `lane` now.
  bool CanStart(int lane) const REQUIRES(mu_);
  // Runs `job` on `lane` (taken off the queue, the lane marked running) and settles the lane.
  void RunJob(int lane, Job job) EXCLUDES(mu_);
  StatusOr<ClientConnection*> Connect(Lane& lane, bool main, const Deadline& deadline, int64_t not_epoch);
  // The directory says pserver index_ is now at `epoch` (0: gone): abandons calls to any other.
  void Supersede(int64_t epoch);

  const int index_;
  PserverDirectory* directory_;
  Owner* owner_;
  const Transport* transport_;
  int subscription_ = 0;
  Lane lanes_[2];

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Job> queue_ GUARDED_BY(mu_);
  uint64_t next_job_ GUARDED_BY(mu_) = 1;
  LaneState lanes_state_ GUARDED_BY(mu_);  // what each lane runs (client_rules.h)
  bool closing_ GUARDED_BY(mu_) = false;
  std::string chosen_name_ GUARDED_BY(mu_);
  std::thread thread_;       // the main lane
  std::thread lane_thread_;  // the second lane
};

}  // namespace tessera
