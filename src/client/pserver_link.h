// PserverLink: the trainer's connection to one pserver index: a worker thread that runs that
// pserver's requests in order, one at a time (requests to different pservers run concurrently).
// A thread waiting for a request may run it itself if the worker has not started it yet
// (RunInline), which spares two thread hand-offs on the common submit-then-wait path.
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
#include <thread>

#include "common/mutex.h"
#include "client/pserver_directory.h"
#include "client/request_builder.h"
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
  };

  // Called with the outcome; for a refused push (Aborted: the step closed) `resume_step` says
  // where the pserver wants the trainer to continue.
  using Done = std::function<void(const Status&, const wire::DataReply&, int64_t resume_step)>;

  PserverLink(int index, PserverDirectory* directory, Owner* owner, const Transport* transport);
  ~PserverLink();

  int index() const { return index_; }
  // Queues `call`; `done` runs when it has finished (or failed), on the link's thread or on the
  // thread that ran it through RunInline. With `recover`, see Run(). Returns the job's id (for
  // RunInline).
  uint64_t Submit(std::shared_ptr<LinkCall> call, std::chrono::milliseconds timeout, bool recover, Done done);
  // Runs job `id` on the calling thread if it is next in line and the link is idle (nothing
  // else runs on the link meanwhile); false if the link thread has it or it is not next.
  bool RunInline(uint64_t id);
  // Runs `fn` on the link's thread, after the requests queued before it.
  void Post(std::function<void()> fn);
  // Sends `call` with retries until `deadline`. With `recover`, a pserver that lost its state is
  // re-initialized / re-joined through the Owner first. REQUIRES: on the link's thread (inside
  // a posted function or the Owner's recovery).
  StatusOr<wire::DataReply> Run(LinkCall& call, const Deadline& deadline, bool recover,
                                int64_t* resume_step = nullptr);
  void Close();
  // The transport of the current connection ("" before the first), e.g. for `tessera status`.
  std::string transport_name() const;

 private:
  struct Job {
    uint64_t id = 0;  // 0: only the link thread runs it
    std::function<void()> fn;
  };
  void Loop();
  StatusOr<ClientConnection*> Connect(const Deadline& deadline, int64_t not_epoch);
  // The directory says pserver index_ is now at `epoch` (0: gone): abandons calls to any other.
  void Supersede(int64_t epoch) EXCLUDES(conn_mu_);
  // The link's thread is the only writer of conn_ and target_ (under conn_mu_), so on that
  // thread it reads them without the lock; Supersede, on the directory's thread, takes it.
  ClientConnection* OwnConnection() const NO_THREAD_SAFETY_ANALYSIS { return conn_.get(); }
  const PserverAddress& OwnTarget() const NO_THREAD_SAFETY_ANALYSIS { return target_; }

  const int index_;
  PserverDirectory* directory_;
  Owner* owner_;
  const Transport* transport_;
  int subscription_ = 0;
  // conn_ and target_ change only on the link's thread, under conn_mu_ (Supersede reads them
  // from the directory's thread).
  Mutex conn_mu_;
  std::unique_ptr<ClientConnection> conn_ GUARDED_BY(conn_mu_);
  PserverAddress target_ GUARDED_BY(conn_mu_);
  int64_t aborted_epoch_ GUARDED_BY(conn_mu_) = 0;  // the connection to this registration was abandoned
  EndpointChoice chosen_;
  int64_t shm_failed_epoch_ = -1;  // auto: shared memory could not connect to this registration

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Job> queue_ GUARDED_BY(mu_);
  uint64_t next_job_ GUARDED_BY(mu_) = 1;
  bool running_ GUARDED_BY(mu_) = false;  // a job runs (on the link thread or inline)
  bool closing_ GUARDED_BY(mu_) = false;
  std::string chosen_name_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tessera
