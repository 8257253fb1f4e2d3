// ClientImpl: the trainer client behind include/tessera/client.h, a thin shell around the pure
// rules of client_rules.h. Its parts live in three files:
//   client.cc          connecting, the public operations (push, pull, sparse), dispatch, closing
//   client_join.cc     initialization under the init lock, the start-step join
//   pserver_link.cc    one worker per pserver running requests with retry (PserverLink)
//   trainer_membership.cc  the lease and the registration
//   link_recovery.cc   what a link asks when it meets a restarted pserver (PserverLink::Owner)
// Thread-safety: as Client (one trainer thread calls it); links call LinkRecovery from their
// threads, which reads only what is fixed once training starts.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/arriving_values.h"
#include "client/client_rules.h"
#include "client/handle_state.h"
#include "client/link_recovery.h"
#include "client/pserver_directory.h"
#include "client/pserver_link.h"
#include "client/request_builder.h"
#include "client/trainer_membership.h"
#include "coord/etcd_client.h"
#include "job/job_config.h"
#include "job/slot_map.h"
#include "tessera/client.h"
#include "transport/shm_window.h"

namespace tessera {

class ClientImpl : public Client {
 public:
  ~ClientImpl() override { (void)Close(); }
  static StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& o, const ClientLimits& limits = {});

  // ---- Client (client.cc) ----
  StatusOr<std::span<float>> DenseMemory(size_t floats) override;
  Status AddDense(const std::string& name, float* values, size_t size, const OptimizerConfig* opt) override;
  Status AddSparse(const std::string& name, int dim, const InitializerConfig& init,
                   const OptimizerConfig* opt, const TableLimits* limits) override;
  Status Initialize() override;  // client_join.cc
  Handle Pull() override;
  Handle Push(const Gradients& grads) override { return Handle(DoPush(grads, PushMode::kPush)); }
  Handle PushPull(const Gradients& grads) override { return Handle(DoPush(grads, PushMode::kPushPull)); }
  Handle PushPullAndWait(const Gradients& grads) override;
  Handle SparsePull(const std::string& table, std::span<const uint64_t> keys, float* out) override;
  Handle PushPiece(const Gradients& piece, bool last, bool pull) override;  // client_pieces.cc
  int64_t block_size() const override { return job_.block_size; }
  StatusOr<int> SparseDim(const std::string& table) const override;
  int64_t step() const override { return step_.load(); }
  const std::string& trainer_id() const override { return member_->id(); }
  int num_pservers() const override { return job_.pservers; }
  ConsistencyMode mode() const override { return job_.mode; }
  Status WaitForTrainers(int n, std::chrono::milliseconds timeout) override;
  Status Close() override;

 private:
  ClientImpl(const ClientOptions& o, const ClientLimits& limits);

  // ---- client_join.cc ----
  void RecordTransports();
  std::string TransportsText() const;
  bool AnyReady() const;
  // InvalidArgument when the job's wire names a parameter this trainer did not declare.
  Status CheckWireNames() const;
  Status InitializePservers(const Deadline& d);
  Status InitializeUnready(const Deadline& d);
  Status RestoreFromOthers(const Deadline& d, int ready, int64_t* version);
  Status JoinAll(const Deadline& d);
  Status Realign();

  // ---- client_pieces.cc ----
  // Whether pieces go to the pservers as they come (sync, no replicas, no elastic shards, no
  // backup trainers); elsewhere they are gathered into one push.
  bool PiecesOnWire() const;
  Handle GatherPiece(const Gradients& piece, bool last, bool pull);
  // The step pushed in pieces, from its first piece to its last.
  struct PieceStep {
    bool open = false;
    int64_t step = 0;
    std::vector<int> next;  // per pserver: the next piece's index there
    // Per pserver: the dense blocks pulled back with values during the step (written by the
    // link's thread, read by the last piece's `before`, on the same link after them). The pieces
    // run one at a time: overlapping them measured slower on the mlp and the PyTorch MLP, whose
    // pieces are small (bench/README.md).
    std::vector<std::shared_ptr<std::vector<RequestBuilder::BlockRef>>> received;
    bool dropped = false;  // a piece held NaN/Inf: the rest of the step's push is not sent
    Handle dropped_handle;
    // Gathered pieces (not on the wire): whole dense gradients and sparse rows.
    std::map<std::string, std::vector<float>> dense;
    std::map<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>> sparse;
    int64_t samples = 0;
  };
  PieceStep piece_;

  // ---- client.cc ----
  Status OnEveryLink(const std::function<Status(PserverLink&)>& fn);
  bool AllOverShm() const;
  int64_t PullNeed(int64_t step) const;
  std::vector<std::unique_ptr<LinkCall>> NewCalls() const;
  static std::shared_ptr<Handle::State> Failed(const Status& s);

  // How a step's gradient goes out (DoPush).
  enum class PushMode {
    kPush,      // the gradient alone
    kPushPull,  // and the next step's values back with it
    // ... and the caller waits at once (PushPullAndWait): it runs the first call itself, and the
    // job's only pserver may scan the gradient for non-finite values instead of this trainer
    // (ScanAtPserver); its finding comes back with the reply (Handle::State::dropped).
    kPushPullAndWait,
  };
  // `keep`: what the gradients' buffers belong to, kept until the requests are done.
  // `arriving` (kPushPullAndWait only): where the step's values are tracked as they arrive over
  // several calls in place, when they are (ArrivingValues::Track; null otherwise).
  std::shared_ptr<Handle::State> DoPush(const Gradients& grads, PushMode mode,
                                        std::shared_ptr<const void> keep = nullptr,
                                        std::shared_ptr<ArrivingValues>* arriving = nullptr);
  // The trainer's scan of a gradient for NaN and infinity: where the first one is ("'w'
  // element 7"), or "" (none, or the job allows them).
  std::string ScanGradient(const Gradients& grads) const;
  // A gradient dropped at `step` for `why` (NonFiniteGradient), found here or by the pserver:
  // logged, and what the push says under the job's policy.
  Status DropNonFinite(const std::string& why, int64_t step);

  // How Dispatch sends an operation's calls, one (or, cut in parts, several) per pserver.
  struct Sending {
    // Every pserver gets its call, an empty one too (a sync or ssp step); else empty calls are left out.
    bool all = false;
    // A pserver found restarted is made ready again (PserverLink::Owner) and the call sent again.
    bool recover = true;
    // The push stands for a dropped gradient: what Wait() says once the rest succeeded.
    std::optional<Status> dropped;
    // A plain pull or dense push larger than two parts of this many bytes is cut into such parts
    // (RequestBuilder::SplitPull, SplitPush), which run two at a time on their link as one
    // overlap group (PserverLink::Submit) (0: never; a push only where the job takes async pieces).
    size_t part_bytes = 0;
    // The caller waits on the Handle at once, so the first call is left for it to run (no link
    // thread is woken for it); the others' link threads start theirs meanwhile.
    bool caller_waits = false;
  };
  std::shared_ptr<Handle::State> Dispatch(std::vector<std::unique_ptr<LinkCall>> calls, Sending how);
  // A new overlap group for Dispatch.
  uint64_t NewGroup() { return next_group_.fetch_add(1) + 1; }
  // Where the calls of a large pull or async push are cut (ClientOptions::pipeline).
  static constexpr size_t kPartBytes = 4 << 20;
  Status LeaseLost() const;
  void RaiseStep(int64_t to);

  const ClientOptions options_;
  std::atomic<uint64_t> next_group_{0};
  const ClientLimits limits_;
  PserverLink::Transport transport_;
  // DenseMemory's, shared with the shm connections (transport_.options.window).
  std::shared_ptr<ShmWindow> window_ = std::make_shared<ShmWindow>();
  // In the window after the model's memory, where a job has several pservers: room for the
  // calls of a step that cannot go in place in the model's memory (ArrivingValues).
  ArrivingValues::Staging staging_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  JobConfig job_;
  SlotMap slots_;
  // The trainer's lease and registration. Once the lease is lost the registration went with it,
  // so every later operation fails and says so (a supervisor restarts the trainer).
  std::unique_ptr<TrainerMembership> member_;
  std::unique_ptr<RequestBuilder> builder_;
  std::unique_ptr<PserverDirectory> directory_;
  // What the links ask when they meet a restarted pserver (they call into nothing else).
  std::unique_ptr<LinkRecovery> recovery_;
  std::vector<std::shared_ptr<PserverLink>> links_;
  std::atomic<int64_t> step_{0};
  // A push was refused on some pserver (the step closed there without us): before the next
  // request, every pserver is told where this trainer goes on, so none waits for a push for a
  // step it skipped.
  std::atomic<bool> realign_{false};
  bool initialized_ = false;
  bool closed_ = false;
  NonFiniteStreak nonfinite_;
};

}  // namespace tessera
