// PserverService: a pserver's request handler. It decodes each data-plane request, checks it
// whole (job token, epoch, then its segments through one SegmentList: names, sizes, dtype, and
// finiteness), then, under one lock, feeds the Consistency state machine and the ShardStore and
// answers: at once, or later for a pull that waits on a barrier or on the staleness bound. Sync
// barriers are applied here: the held gradients are summed in trainer-id order and applied once
// with scale 1/total samples.
//
// A step applies on every pserver or on none of them: a push refused for its content (a
// non-finite value, an unknown name, a wrong size) still counts as the trainer's push for its
// step, with nothing in it, so this pserver's version moves on with the others instead of
// waiting for a push that never comes. Each refusal is logged with the trainer and what was
// wrong, and counted (Counters::refused); so are the empty pushes a trainer sends in place of a
// gradient it dropped (Counters::skipped).
//
// Files: pserver_service.cc (requests and pushes), pserver_service_apply.cc (applying pushes
// and barriers, draining events, building pull replies), pserver_service_pieces.cc (pushes in
// pieces), pserver_service_init.cc (initialization, checkpoint restore and snapshot),
// pserver_service_queries.cc (status, describe, export cuts), pserver_service_lifecycle.cc
// (trainers leaving, stop and resume, counters), pserver_service_replicas.cc (replication
// records, backups, promotion).
// Owned by the pserver process (PserverNode), which feeds it membership changes from etcd and
// stops it when the lease is lost. Thread-safe: Handle() is called from transport threads.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/delta_policy.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "job/job_config.h"
#include "job/slot_map.h"
#include "pserver/change_stamps.h"
#include "pserver/consistency.h"
#include "pserver/due_snapshots.h"
#include "pserver/export_cuts.h"
#include "pserver/held_pushes.h"
#include "pserver/pull_queue.h"
#include "pserver/replica_log.h"
#include "pserver/segment_list.h"
#include "pserver/shard_store.h"
#include "pserver/step_pieces.h"
#include "pserver/step_sums.h"
#include "tessera/data.pb.h"
#include "transport/transport.h"

namespace tessera {

struct PserverServiceOptions {
  int index = 0;
  int64_t epoch = 0;  // this pserver's registration epoch
  JobConfig job;
  SlotMap slots;
  // Called (outside the lock) when a trainer finishes initialization; records readiness in etcd.
  std::function<Status(int64_t version)> on_initialized;
  // Asked on every request: is this pserver's lease known alive right now? A pserver that
  // stalled (SIGSTOP, a long pause) past its lease must answer nothing after it resumes, even
  // before its lease keeper has run again. Null: always alive (tests).
  std::function<bool()> lease_alive;
  // Consistent checkpoints (sync, job checkpoint steps N > 0 and a checkpoint directory): a copy
  // of the shard is taken under the lock when a barrier makes the version a multiple of N, and
  // at the first initialization, for the checkpoint thread to write (TakeDueSnapshot). Every one
  // is written, in order: the pservers of a job must hold the same versions for a rollback to
  // find one they all hold. A reply sent while more than kMaxDueSnapshots wait to be written
  // waits for the checkpoint thread (up to kSnapshotWait), so training goes no faster than its
  // checkpoints are written; `snapshot_due` (if set) wakes that thread.
  int64_t snapshot_every = 0;
  std::function<void()> snapshot_due;
  std::string job_name;  // recorded in checkpoints
  // When a checkpoint copy may be a delta of the sparse rows changed since the last one.
  DeltaPolicy delta_policy;
  // Threads that share a step's dense updates and one large sparse request's rows
  // (ShardStore::SetPool). 0: the machine's hardware threads, at most 8.
  int apply_threads = 1;
  // Where request timings, pull waits and barrier waits are observed (null: not measured).
  metrics::Registry* metrics = nullptr;
  // Replicas (the job's replicas > 1): this service starts as a backup of shard `index`, taking
  // the primary's REPLICATE records and refusing trainers, until Promote(). A primary publishes
  // every change to the outbox (SetOutbox) and answers nothing that depends on it before the
  // shell reports it Committed() (every backup has it).
  bool backup = false;
};

class PserverService : public RequestHandler {
 public:
  explicit PserverService(PserverServiceOptions options);
  ~PserverService() override;

  // A push in half precision is widened as it comes over tcp (pserver/push_widener.h), if it is
  // no larger than one whose segments this shard has read.
  RequestWatcher* Watch(std::string_view header, size_t payload_bytes) override;
  void Handle(std::string_view header, ConstBuffer payload, std::unique_ptr<Responder> responder) override;

  // A copy of the shard at the current version, taken under the lock (the only stall a
  // checkpoint causes): whole, or a delta when the chain the checkpointer reported last
  // (SetCheckpointChain) allows one (delta_policy.h). FailedPrecondition before the shard is
  // initialized.
  StatusOr<Checkpoint> SnapshotForCheckpoint(const std::string& job);
  // What the next checkpoint copy may build on (from Checkpointer::chain()).
  void SetCheckpointChain(const CheckpointChainState& chain);
  // The shard's checkpoint generation (ShardStore::checkpoint_gen), e.g. after a restore.
  int64_t CheckpointGen();
  // Before serving: holds the checkpoint's shard at its version, not yet ready. The first INIT
  // decides what the dense values are: a trainer that was training (its step is past the
  // checkpoint's version) refills them with its current values and the version moves to its
  // step; an INIT at or below the checkpoint's version (a fresh trainer's initial values) is
  // not applied. Optimizer state and sparse rows come from the checkpoint either way.
  Status RestoreCheckpoint(const Checkpoint& c);
  // The version a checkpoint would have now, or -1 before initialization.
  int64_t CheckpointableVersion();
  // The oldest snapshot taken at a due version (see snapshot_every) and not taken yet; none if
  // there is none.
  std::optional<Checkpoint> TakeDueSnapshot();
  // Due snapshots not taken yet.
  size_t due_snapshots() const { return due_.size(); }

  // A trainer's registration disappeared from etcd (epoch 0: any).
  void TrainerLeft(const std::string& trainer, int64_t epoch);
  // Refuses every request (and fails waiting pulls) with `why`, e.g. when the lease is lost.
  void StopServing(const Status& why);
  // Serves again (the lease was confirmed alive after an etcd outage).
  void ResumeServing();
  bool serving() const { return serving_.load(); }

  // ---- Replicas ----
  // A backup takes over as the shard's primary under its new registration `epoch`, from the
  // last record it applied. FailedPrecondition if it never received the shard.
  Status Promote(int64_t epoch);
  bool backup() const;
  // Where this primary's records go from now on (null: nowhere; nothing then waits for backups).
  void SetOutbox(ReplicaOutbox* outbox);
  // Under the lock, a snapshot record of the shard as it is now, handed to `attach`, which must
  // attach the new backup's stream to the outbox before returning (every later record then
  // reaches it, in order). FailedPrecondition before the shard is initialized.
  Status AttachBackup(const std::function<void(std::shared_ptr<const ReplicaMessage>)>& attach);
  // Every attached stream has acknowledged the records up to `seq`: the answers held for them go.
  void Committed(int64_t seq);
  // The newest record published (0: none).
  int64_t published() const;

  struct Counters {
    int64_t version = 0;
    int64_t pushes = 0;
    int64_t pulls = 0;
    int64_t bytes_in = 0;
    int64_t bytes_out = 0;
    int64_t refused = 0;     // pushes refused for their content
    int64_t skipped = 0;     // empty pushes standing for a gradient a trainer dropped
    int64_t late = 0;        // sync with backup trainers: pushes that came after their step closed (dropped)
    int64_t overlapped = 0;  // data requests that began while another one was being handled
    int64_t widened_as_they_came = 0;  // pushes in half precision widened as their bytes came (tcp)
    bool initialized = false;
    int64_t param_bytes = 0;                     // values and optimizer state held
    std::vector<ShardStore::ParamStats> params;  // per parameter: elements (rows) and bytes held
  };
  Counters counters() const;

 private:
  struct Reply {
    wire::DataReply header;
    MutableBuffer payload;     // lent by the responder (Allocate), or `owned`'s memory
    std::vector<float> owned;  // EXPORT_READ pages
    std::unique_ptr<Responder> responder;
    // The pulled dense blocks, copied into `payload` by Send (after the lock) unless a change to
    // the shard did it first. Declared after `responder`: dropped first, as it may write there.
    DeferredCopies::Ticket copy;
    // The copy narrows (a pull in a wire format): Send makes it as the reply goes.
    bool narrowed = false;
  };

  void HandleData(wire::DataRequest& req, ConstBuffer payload, std::unique_ptr<Responder> r);
  // HandleData's phases, under mu_: the request checked whole before anything is applied
  // (CheckData: the segments, the payload's size and finiteness, a piece's numbering), the push
  // counted and applied or held (CountPush: the consistency verdict), and the answer (AnswerData:
  // the pull now or when its version comes, or an acknowledgement).
  struct DataCheck {
    std::optional<SegmentList> push, pull;
    std::optional<StepPieces::Arrival> arrival;                       // a piece that is kept
    std::optional<StatusOr<Consistency::PushVerdict>> piece_verdict;  // a piece's
    bool drop_pieces = false;  // a piece standing for a dropped gradient
    bool found_here = false;   // this pserver's scan took a non-finite gradient as dropped
    // A push in a wire format, decoded into float32 (the payload points here): the handling
    // thread's buffer, which a held push takes instead of a copy (giving its old one back).
    std::string* widened = nullptr;
    size_t received_bytes = 0;   // the push's payload as it came (counted in bytes_in)
  };
  struct DataAnswer {
    int64_t need = 0;    // the version the answer waits for
    int64_t resume = 0;  // a late push: where its trainer goes on
    std::unique_ptr<PullQueue::Prepared> prepared;
  };
  // `*payload` is emptied when a non-finite gradient is taken as dropped, and points at
  // c->widened when the push was in a wire format. `nonfinite`: the first non-finite float of the
  // payload, -1 for none, kNotScanned when the payload is not float32 (scanned once widened).
  static constexpr int64_t kNotScanned = -2;
  Status CheckData(wire::DataRequest& req, ConstBuffer* payload, int64_t nonfinite, DataCheck* c)
      REQUIRES(mu_);
  // An error is the push's refusal (answer->resume: where the trainer goes on).
  Status CountPush(wire::DataRequest& req, ConstBuffer payload, DataCheck& c, Responder& r,
                   std::vector<Reply>* replies, DataAnswer* answer) REQUIRES(mu_);
  // Takes `r` unless it fails (a pull the consistency refuses).
  Status AnswerData(wire::DataRequest& req, DataCheck& c, std::unique_ptr<Responder>& r, DataAnswer& answer,
                    std::vector<Reply>* replies) REQUIRES(mu_);
  // Whether a pull is answered in a wire format (CodedPullReply): half precision, or dense
  // blocks' changes since the trainer's `since` (parameters whose pushes are topk or sign).
  bool CodedPull(const SegmentList& pull) const REQUIRES(mu_);
  // Writes such a reply's values at `out` (room for pull.wire_bytes()) and its segments in
  // `header`: each dense block whole or, where smaller, as the elements changed since the
  // trainer's `since` (ChangeStamps; TOP_K), with the token of the values sent. A block sent whole
  // is left to `later`, to be copied (narrowed) after the lock like a plain pull's. Returns the
  // bytes.
  size_t CodedPullReply(const SegmentList& pull, char* out, wire::DataReply* header,
                        std::vector<DeferredCopies::Part>* later) REQUIRES(mu_);
  // Whether the changes to a dense parameter's values are stamped (ChangeStamps): its pushes keep
  // what they did not send (topk, sign), and its optimizer leaves an element a zero gradient
  // does not touch as it was.
  bool Tracked(const std::string& param) const REQUIRES(mu_);
  // The change stamps in step with the store: reset when its dense values changed otherwise than
  // by a stamped apply (initialized, restored, moved in).
  void SyncChangeStamps() REQUIRES(mu_);
  void HandleInit(const wire::DataRequest& req, ConstBuffer payload, std::unique_ptr<Responder> r);
  void HandleMembership(const wire::DataRequest& req, std::unique_ptr<Responder> r);  // JOIN, LEAVE
  void HandleInitDone(const wire::DataRequest& req, std::unique_ptr<Responder> r);
  void HandleStatus(std::unique_ptr<Responder> r);
  void HandleDescribe(std::unique_ptr<Responder> r);
  // EXPORT_CUT, EXPORT_READ, EXPORT_RELEASE (see ExportCuts).
  void HandleExport(const wire::DataRequest& req, std::unique_ptr<Responder> r);
  // Reads a taken cut (outside the lock: a cut does not change).
  Status ReadCut(const ShardValues& cut, const wire::DataRequest& req, Reply* rep) const;
  // Takes the cuts due at the current version (one copy for all of them). REQUIRES: mu_ held.
  void TakeDueCuts() REQUIRES(mu_);
  void HandleReplicate(const wire::DataRequest& req, ConstBuffer payload, std::unique_ptr<Responder> r);
  // Publishes what the last event changed (the recorded calls and the consistency state), if
  // anything. REQUIRES: mu_ held.
  void PublishChanges() REQUIRES(mu_);
  // Holds `replies` back while a published record is not committed (they are sent by Committed()).
  void HoldUntilCommitted(std::vector<Reply>* replies) REQUIRES(mu_);
  bool replicated() const { return options_.job.hosted(); }  // shards that may move or fail over
  Consistency::Options ConsistencyOptions() const {
    return {options_.job.mode, options_.job.min_trainers, options_.job.backup_trainers};
  }

  // Applies the gradients of one push (async/ssp). REQUIRES: mu_ held.
  void ApplyPush(const SegmentList& list, const float* payload, float scale) REQUIRES(mu_);
  // Applies dense_updates_, writing the new values into the replies prepared for it (pulls_).
  void ApplyDenseUpdates(float scale) REQUIRES(mu_);
  // A push whose content was refused with `why`: it counts as the trainer's (empty) push for its
  // step where the consistency rule takes it, so the version moves on as on the other pservers.
  // REQUIRES: mu_ held.
  void RefusePush(const wire::DataRequest& req, const Status& why, std::vector<Reply>* replies) REQUIRES(mu_);
  // Keeps a sync push or one piece of it for the open step (its segments are swapped out of
  // `req`); `counted`: the push is now complete. REQUIRES: mu_ held.
  void HoldPiece(wire::DataRequest& req, SegmentList list, ConstBuffer payload, bool counted) REQUIRES(mu_);
  // ---- Pushes in pieces (pserver_service_pieces.cc) ----
  static bool InPieces(const wire::DataRequest& req) { return req.piece() != 0 || req.more_pieces(); }
  // A whole push whose trainer left the non-finite scan to this pserver, its job's only one
  // (nonfinite_skips): a non-finite gradient is its dropped one, not a refusal; `dropped` on the
  // reply says so. With several pservers the flag is ignored: a push refused here while another
  // pserver took its part is a client that skipped its own scan, and counts as refused.
  bool TakesNonFiniteAsSkipped(const wire::DataRequest& req) const {
    return req.nonfinite_skips() && req.is_push() && !InPieces(req) && options_.job.pservers == 1;
  }
  void SayDropped(const wire::DataRequest& req, wire::DataReply* reply) const {
    if (TakesNonFiniteAsSkipped(req) && !req.skipped().empty()) reply->set_dropped(req.skipped());
  }
  // The first check of a piece (before anything changes): CheckPiece, then StepPieces::Arrive.
  // Sets *arrival for a piece that is kept. REQUIRES: mu_ held.
  StatusOr<Consistency::PushVerdict> ArrivePiece(const wire::DataRequest& req, const SegmentList& list,
                                                 std::optional<StepPieces::Arrival>* arrival) REQUIRES(mu_);
  // Applies the dense blocks every contributor of the open step has sent (StepPieces) and
  // answers the pieces' pulls that wait only for them. REQUIRES: mu_ held.
  void ApplyReadyBlocks(std::vector<Reply>* out) REQUIRES(mu_);
  // A piece's pull may be answered before the barrier: it is not the last piece, needs the next
  // version and pulls only dense blocks applied early. REQUIRES: mu_ held.
  bool PieceAnswerable(const wire::DataRequest& req, const SegmentList& pull) const REQUIRES(mu_);
  // A pull of a block applied early for the open step must wait for the barrier (the version it
  // needs is older than the block's values). REQUIRES: mu_ held.
  bool PullsAnEarlyBlock(const SegmentList& pull) const REQUIRES(mu_);
  // The step's blocks applied before its barrier, and the pieces held for it, are forgotten.
  void ClearPieces() REQUIRES(mu_);
  bool mixed() const REQUIRES(mu_) { return pieces_.any_applied(); }
  // Runs what the consistency machine says (barriers, released pulls). REQUIRES: mu_ held.
  void Drain(std::vector<Reply>* out) REQUIRES(mu_);
  void ApplyBarrier(const Consistency::Barrier& b) REQUIRES(mu_);
  // Records how long an apply that began at `start` took (tessera_pserver_apply_seconds).
  void ObserveApply(std::chrono::steady_clock::time_point start);
  // Builds a pull reply from the store, in `prepared`'s payload when given. REQUIRES: mu_ held.
  Reply BuildPullReply(const wire::DataRequest& req, const SegmentList& pull, std::unique_ptr<Responder> r,
                       PullQueue::Prepared* prepared = nullptr) REQUIRES(mu_);
  void FillStatus(wire::DataReply* reply, Status s, wire::DataReply::Reason reason) const;
  // A checkpoint's job, index, time and version, without the shard.
  Checkpoint HeaderLocked() const REQUIRES(mu_);
  // A whole copy of the shard at the current version (for a replica); changes nothing.
  Checkpoint SnapshotLocked() const REQUIRES(mu_);
  // A copy for a checkpoint, whole or a delta (see SnapshotForCheckpoint).
  Checkpoint CheckpointLocked() REQUIRES(mu_);
  static void Send(Reply& reply);
  // Queues a due snapshot for the checkpoint thread (DueSnapshots) and wakes that thread.
  void AddDueSnapshot(Checkpoint c) REQUIRES(mu_);
  static void SendError(Responder& r, const Status& s, wire::DataReply::Reason reason, int64_t resume = 0);

  PserverServiceOptions options_;
  std::atomic<bool> serving_{true};
  std::atomic<int> data_in_progress_{0};     // HandleData calls under way
  std::atomic<size_t> watch_limit_{0};       // the largest coded push whose segments were read
  std::atomic<int64_t> data_overlapped_{0};  // ... begun while another was under way
  std::unique_ptr<WorkPool> pool_;           // null: one thread
  // Due snapshots for the checkpoint thread (its own lock, taken inside mu_). A step's replies
  // wait while more than one waits to be written, at most a minute; beyond four the oldest goes.
  DueSnapshots due_;

  mutable Mutex mu_;  // guards everything below
  Status stop_reason_ GUARDED_BY(mu_);
  ShardStore store_ GUARDED_BY(mu_);
  std::unique_ptr<Consistency> consistency_ GUARDED_BY(mu_);
  bool initialized_ GUARDED_BY(mu_) = false;
  int64_t restored_version_ GUARDED_BY(mu_) =
      -1;  // the checkpoint's version until the first INIT_DONE, else -1
  bool refill_logged_ GUARDED_BY(mu_) = false;
  HeldPushes held_ GUARDED_BY(mu_);  // sync: the pushes held for the open step
  // sync: the open step's pushes in pieces, and its blocks applied before the barrier.
  StepPieces pieces_ GUARDED_BY(mu_);
  // A checkpoint asked for while some blocks were ahead of the version (mixed()): taken at the
  // next barrier instead, as a due snapshot.
  bool snapshot_wanted_ GUARDED_BY(mu_) = false;
  // The pulls answered later, and the replies the next apply writes into.
  PullQueue pulls_ GUARDED_BY(mu_);
  StepSums sums_ GUARDED_BY(mu_);  // sync: a barrier's sums, their buffers reused every step
  // A job whose pushes are topk or sign: which dense elements each apply changed (pulls of the
  // changes only), valid while the store's dense generation is stamps_generation_.
  ChangeStamps stamps_ GUARDED_BY(mu_){NewStampId()};
  uint64_t stamps_generation_ GUARDED_BY(mu_) = 0;
  static uint32_t NewStampId();
  std::vector<ShardStore::DenseUpdate> dense_updates_ GUARDED_BY(mu_);  // a step's, applied together
  Counters counters_ GUARDED_BY(mu_);
  ExportCuts<ShardValues> cuts_ GUARDED_BY(mu_);
  CheckpointChainState chain_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point step_opened_
      GUARDED_BY(mu_);  // sync: the first push held for the open step

  // Replicas.
  std::atomic<int64_t> epoch_;  // the registration epoch served (changes on Promote)
  bool backup_ GUARDED_BY(mu_) = false;
  // The replication record (the store calls recorded, what was published and committed), and the
  // answers held until their record is committed.
  ReplicaLog replicas_ GUARDED_BY(mu_);
  HeldReplies<Reply> held_replies_ GUARDED_BY(mu_);
};

}  // namespace tessera
