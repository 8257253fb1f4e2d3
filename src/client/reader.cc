// Reader implementation (see include/tessera/reader.h).
#include "tessera/reader.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "client/fetch_ahead.h"
#include "client/job_connection.h"
#include "client/master_client.h"
#include "client/reader_on.h"
#include "common/clock.h"
#include "coord/keys.h"
#include "coord/lease_keeper.h"
#include "coord/registry.h"
#include "dataset/manifest.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "recordio/file.h"

namespace tessera {
namespace {

class ReaderImpl : public Reader {
 public:
  // A reader on a connection of its own (`shared` null) or on its trainer's (reader_on.h).
  static StatusOr<std::unique_ptr<Reader>> Create(const ReaderOptions& o, const TrainerConnection* shared) {
    std::unique_ptr<ReaderImpl> r(new ReaderImpl());
    r->options_ = o;
    r->ahead_rule_ = FetchAheadRule(o.fetch_ahead_records);
    TrainerConnection own;
    if (!shared) {
      TESSERA_ASSIGN_OR_RETURN(JobConnection job, ConnectJob(o.connection, o.connect_timeout));
      r->own_etcd_ = std::move(job.etcd);
      own = {r->own_etcd_.get(), std::move(job.config), std::move(job.secret), std::move(job.tls)};
      shared = &own;
    }
    r->etcd_ = shared->etcd;
    r->master_ = std::make_unique<master::MasterClient>(r->etcd_, o.connection.job, shared->config.token,
                                                        shared->secret, shared->tls);
    r->trainer_ = o.trainer_id;
    if (r->trainer_.empty()) {
      // A reader on its own registers a trainer id, so the master can return its tasks if it dies.
      TESSERA_ASSIGN_OR_RETURN(r->keeper_, LeaseKeeper::Start(r->etcd_, {o.lease_ttl_seconds, {}}));
      Registry reg(r->etcd_, keys::TrainerPrefix(o.connection.job));
      nlohmann::json info = {{"pid", static_cast<int64_t>(::getpid())}, {"reader", true}};
      TESSERA_ASSIGN_OR_RETURN(Claim claim, reg.ClaimLowestFree(info.dump(), r->keeper_->id()));
      r->trainer_ = std::to_string(claim.index);
    }
    return std::unique_ptr<Reader>(std::move(r));
  }

  StatusOr<bool> Next(std::string* record) override {
    MaybeReportProgress();
    while (next_ >= records_.size()) {
      if (have_task_) {
        trained_wait_.push_back(ReaderHeldTask{task_.id(), task_.epoch(), task_.pass(),
                                               static_cast<int64_t>(records_.size()),
                                               static_cast<int64_t>(records_.size())});
        have_task_ = false;
      }
      if (finished_) return false;
      TESSERA_ASSIGN_OR_RETURN(bool got, FetchTask());
      if (!got) return false;  // finished, or the caller must train and acknowledge first
    }
    Take(record);
    return true;
  }

  StatusOr<bool> NextInTask(std::string* record) override {
    MaybeReportProgress();
    if (!have_task_ || next_ >= records_.size()) return false;
    Take(record);
    return true;
  }

  Status Trained() override { return TrainedAt(-1); }

  Status TrainedAt(int64_t step) override {
    // A task is acknowledged once all its records were handed out and trained. With a step
    // (consistent checkpoints) the acknowledgement is done before the position at that step is
    // reported, so here and now; without, on a thread of its own, one round at a time.
    if (step >= 0) {
      TESSERA_RETURN_IF_ERROR(CollectAcks(true));
      TESSERA_ASSIGN_OR_RETURN(Acked a, Acknowledge(trained_wait_, Deadline(options_.request_timeout), step));
      Count(a);
      trained_wait_.clear();
      return Status::OK();
    }
    if (trained_wait_.empty()) return CollectAcks(false);  // an earlier round's error, if it is over
    TESSERA_RETURN_IF_ERROR(CollectAcks(true));
    acking_tasks_ = std::move(trained_wait_);
    trained_wait_.clear();
    acking_ = std::async(std::launch::async, [this, tasks = acking_tasks_] {
      return Acknowledge(tasks, Deadline(options_.request_timeout), -1);
    });
    return Status::OK();
  }

  std::vector<ReaderHeldTask> Held() const override {
    std::vector<ReaderHeldTask> out = acking_tasks_;
    out.insert(out.end(), trained_wait_.begin(), trained_wait_.end());
    if (have_task_) {
      out.push_back(ReaderHeldTask{task_.id(), task_.epoch(), task_.pass(), static_cast<int64_t>(next_),
                                   static_cast<int64_t>(records_.size())});
    }
    return out;
  }

  // Held(), as the master names them: (task, epoch).
  std::vector<std::pair<int64_t, int64_t>> HeldIds() const {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const auto& h : Held()) out.emplace_back(h.task, h.epoch);
    return out;
  }

  bool finished() const override { return finished_; }
  bool others_training() const override { return others_training_; }
  int pass() const override { return pass_; }
  int passes() const override { return passes_; }
  int job_pass() const override { return job_pass_; }
  const std::string& record_type() const override { return record_type_; }
  ReaderStats stats() const override { return stats_; }
  std::pair<int64_t, int64_t> current_task() const override { return {task_.id(), task_.epoch()}; }

 private:
  ReaderImpl() = default;

  // Hands out the task's next record (REQUIRES: one is left).
  void Take(std::string* record) {
    record->assign(records_[next_++]);
    MaybeFetchAhead();
    ++stats_.records;
  }

  // Every so often, tells the master how far we are in the task; if it split the rest off for
  // an idle trainer, we stop where it says. As often as the master's last answer asked (it paces
  // its trainers by their number and by whether the pass is in its tail: master/report_pace.h).
  // A master that does not say: every 250 ms, and in a pass's tail (it had no task for us ahead)
  // ten times as often: another trainer may be idle, and in sync mode every step waits for its
  // empty one.
  // The report goes on a thread of its own, one at a time, and its answer is taken at a later
  // record: reading does not wait for the master (while one failed over, each report held the
  // reader for its 2 s deadline, nearly the whole outage). The report says how far we may read
  // before we take the answer (as many records as since the report before), the master cuts no
  // sooner, and we wait for the answer if we get there first: no record is read twice. After a
  // report failed we wait for none until one is answered again, so an outage holds the reader
  // once, for one report's deadline. A cut answered late (or lost) is taken where we are: the
  // records read past it are trained twice, here and by the idle trainer.
  void MaybeReportProgress() {
    if (progress_.valid()) {
      const bool must_wait = progress_binding_ &&
                             progress_for_ == std::make_pair(task_.id(), task_.epoch()) &&
                             static_cast<int64_t>(next_) >= progress_until_;
      if (progress_.wait_until(must_wait ? progress_deadline_ : Now()) != std::future_status::ready) {
        // Not answered within its deadline (the client was busy with another call): as failed.
        if (must_wait) progress_binding_ = false;
        return;
      }
      TakeProgressAnswer(progress_.get());
    }
    if (!have_task_ || next_ >= records_.size()) return;
    const TimePoint now = Now();
    const int64_t said = master_pace_ms_.load(std::memory_order_relaxed);
    const std::chrono::milliseconds every =
        said > 0 ? std::chrono::milliseconds(said)
                 : (tail_.load(std::memory_order_relaxed) ? kProgressEveryInTail : kProgressEvery);
    if (now - last_report_ < every) return;
    last_report_ = now;
    const int64_t read_ahead = std::max<int64_t>(1, stats_.records - records_at_report_);
    records_at_report_ = stats_.records;
    progress_for_ = {task_.id(), task_.epoch()};
    progress_until_ = static_cast<int64_t>(next_) + read_ahead;
    progress_deadline_ = now + kProgressDeadline;
    progress_ = std::async(std::launch::async, [master = master_.get(), trainer = trainer_, task = task_.id(),
                                                epoch = task_.epoch(), offset = static_cast<int64_t>(next_),
                                                records = static_cast<int64_t>(records_.size()), read_ahead] {
      return master->ReportTaskProgress(trainer, task, epoch, offset, records, read_ahead,
                                        Deadline(kProgressDeadline));
    });
  }

  void TakeProgressAnswer(const StatusOr<master::MasterClient::TaskProgressAnswer>& end) {
    progress_binding_ = end.ok();
    if (!end.ok()) {
      spdlog::debug("trainer {}: task progress not reported: {}", trainer_, end.status().message());
      return;
    }
    if (end->next.count() > 0) master_pace_ms_.store(end->next.count(), std::memory_order_relaxed);
    if (!have_task_ || progress_for_ != std::make_pair(task_.id(), task_.epoch())) return;  // another task's
    const int64_t stop = end->end_record;
    if (stop <= 0 || stop >= static_cast<int64_t>(records_.size())) return;
    if (stop < static_cast<int64_t>(next_)) {
      spdlog::warn("trainer {}: task {} was cut at record {} in an answer taken after record {} was read: "
                   "records {} to {} are trained twice, here and by an idle trainer",
                   trainer_, task_.id(), stop, next_ - 1, stop, next_ - 1);
    } else {
      spdlog::info("trainer {}: task {} stops at record {} of {}; an idle trainer has the rest", trainer_,
                   task_.id(), stop, records_.size());
    }
    records_.resize(std::max(static_cast<size_t>(stop), next_));
    ++stats_.splits;
  }

  struct Acked {
    int64_t done = 0, stale = 0;
  };
  // Tells the master `tasks` are trained (at `step`, or -1). Touches no member but the master
  // client, so it also runs on the acknowledging thread.
  StatusOr<Acked> Acknowledge(const std::vector<ReaderHeldTask>& tasks, const Deadline& deadline,
                              int64_t step) const {
    Acked a;
    for (const auto& t : tasks) {
      TESSERA_ASSIGN_OR_RETURN(bool accepted, master_->Finish(trainer_, t.task, t.epoch, deadline, step));
      ++(accepted ? a.done : a.stale);
    }
    return a;
  }
  void Count(const Acked& a) {
    stats_.tasks_done += a.done;
    stats_.stale += a.stale;
  }
  // The acknowledgements on their own thread: waits for them (`wait`) or takes them if they are
  // over. On an error their tasks go back to be acknowledged again with the next ones.
  Status CollectAcks(bool wait) {
    if (!acking_.valid()) return Status::OK();
    if (!wait && acking_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return Status::OK();
    StatusOr<Acked> a = acking_.get();
    if (!a.ok()) {
      trained_wait_.insert(trained_wait_.begin(), acking_tasks_.begin(), acking_tasks_.end());
      acking_tasks_.clear();
      return a.status();
    }
    Count(*a);
    acking_tasks_.clear();
    return Status::OK();
  }

  // What one round of asking the master brought: its last answer and, for a task, the task's
  // records (views into `buffers`, per chunk: stored, decompressed).
  struct Fetched {
    master::GetTaskReply reply;
    std::vector<std::pair<std::string, std::string>> buffers;
    std::vector<std::string_view> records;
    int64_t failed = 0;  // tasks failed on the way (chunks that could not be read)
    double seconds = 0;  // how long asking and reading took
  };

  // Asks for a task and reads its chunks; a task whose chunks cannot be read is failed, with the
  // reason, and the next one asked for. Touches no member but the (thread-safe) master client,
  // so it also runs on the fetch-ahead thread.
  // `reuse`: buffers of an earlier task, to read into without allocating again.
  // `held`: the tasks this reader holds (HeldIds()), so that the master hands out again one whose
  // answer never came (this reader gave up on a call the master had answered, or the master
  // that answered died).
  StatusOr<Fetched> Ask(const Deadline& deadline, std::vector<std::pair<std::string, std::string>> reuse,
                        const std::vector<std::pair<int64_t, int64_t>>& held) const {
    Fetched f;
    f.buffers = std::move(reuse);
    const TimePoint start = Now();
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(f.reply, master_->GetTask(trainer_, deadline, &held));
      if (f.reply.task_progress_every_ms() > 0)
        master_pace_ms_.store(f.reply.task_progress_every_ms(), std::memory_order_relaxed);
      f.seconds = std::chrono::duration<double>(Now() - start).count();
      if (f.reply.kind() != master::GetTaskReply::TASK) return f;
      const std::string dir =
          options_.store.empty() ? f.reply.dataset_dir() : options_.store + "/" + f.reply.dataset();
      Status loaded = Load(f.reply.task(), dir, f.reply.dataset(), &f);
      f.seconds = std::chrono::duration<double>(Now() - start).count();
      if (loaded.ok()) return f;
      spdlog::warn("trainer {}: task {} failed: {}", trainer_, f.reply.task().id(), loaded.message());
      ++f.failed;
      (void)master_->Fail(trainer_, f.reply.task().id(), f.reply.task().epoch(), loaded.message(), deadline);
    }
  }

  // Starts fetching the next task once the records left in this one would not outlast a fetch by
  // much (FetchAheadRule). The clock is read every 16 records.
  void MaybeFetchAhead() {
    if (ahead_.valid() || !have_task_) return;
    const auto left = static_cast<int64_t>(records_.size() - next_);
    const auto read = static_cast<int64_t>(next_ - task_first_);
    const double seconds = read % 16 == 0 ? std::chrono::duration<double>(Now() - task_start_).count() : 0;
    if (!ahead_rule_.Now(left, read, seconds)) return;
    // A short deadline: a master that does not answer soon is asked again, with the full
    // timeout, when the records run out (and a closing reader does not wait long for it).
    const auto timeout =
        std::min<std::chrono::milliseconds>(options_.request_timeout, std::chrono::seconds(5));
    ahead_ = std::async(std::launch::async,
                        [this, timeout, reuse = std::move(spare_), held = HeldIds()]() mutable {
                          StatusOr<Fetched> f = Ask(Deadline(timeout), std::move(reuse), held);
                          if (f.ok() && f->reply.kind() == master::GetTaskReply::WAIT)
                            tail_.store(true, std::memory_order_relaxed);
                          return f;
                        });
  }

  // Gets the next task and its records: the one fetched ahead if there is one, else asked for
  // now. False when every pass is done (finished_) or the master has nothing to hand out now.
  StatusOr<bool> FetchTask() {
    std::optional<Fetched> got;
    if (ahead_.valid()) {
      StatusOr<Fetched> f = ahead_.get();
      if (f.ok()) {
        stats_.tasks_failed += f->failed;
        // A wait or the end seen ahead may be out of date now that our task is done: ask again.
        if (f->reply.kind() == master::GetTaskReply::TASK) {
          got = std::move(*f);
          ++stats_.fetched_ahead;
        }
      } else {
        spdlog::debug("trainer {}: fetching the next task ahead failed: {}", trainer_, f.status().message());
      }
    }
    if (!got) {
      // Told "wait" a moment ago: not yet again (an idle sync trainer steps about every ms).
      if (Now() < ask_after_) return false;
      // The master's answer must not depend on when our acknowledgements land: asked before
      // its last task's acknowledgement, a trainer alone would hear "wait" for its own task and
      // take one more step (a run would no longer repeat itself step for step).
      TESSERA_RETURN_IF_ERROR(CollectAcks(true));
      TESSERA_ASSIGN_OR_RETURN(Fetched f,
                               Ask(Deadline(options_.request_timeout), std::move(spare_), HeldIds()));
      stats_.tasks_failed += f.failed;
      got = std::move(f);
    }
    const auto& reply = got->reply;
    passes_ = reply.passes();
    record_type_ = reply.record_type();
    if (reply.kind() == master::GetTaskReply::FINISHED) {
      // Every task is done, ours included: their acknowledgements are over, count them.
      (void)CollectAcks(true);
      finished_ = true;
      job_pass_ = passes_;
      return false;
    }
    job_pass_ =
        std::max(job_pass_, reply.kind() == master::GetTaskReply::TASK ? reply.task().pass() : reply.pass());
    // Other trainers hold the rest of the pass: the caller keeps stepping and asks again.
    if (reply.kind() == master::GetTaskReply::WAIT) {
      others_training_ = reply.others_training();
      // Waiting for others: not again at once. Waiting for our own task's acknowledgement (a
      // trainer alone at a pass's end): at once, so the run repeats itself step for step.
      ask_after_ = others_training_ ? Now() + kAskAgainAfterWait : TimePoint{};
      return false;
    }
    ahead_rule_.Fetched(got->seconds);
    tail_.store(false, std::memory_order_relaxed);
    task_ = reply.task();
    buffers_.swap(got->buffers);  // the views stay valid: the strings themselves do not move
    records_.swap(got->records);
    spare_ = std::move(got->buffers);
    next_ = 0;
    // A piece of a split task ends where the next one starts.
    if (task_.end_record() > 0 && task_.end_record() < static_cast<int64_t>(records_.size()))
      records_.resize(static_cast<size_t>(task_.end_record()));
    // After a rollback mid-task the first records are in the model already; a piece of a
    // split task starts where the one before it ends.
    if (task_.skip_records() > 0) {
      next_ = std::min(records_.size(), static_cast<size_t>(task_.skip_records()));
      spdlog::info("trainer {}: task {} starts at record {} and ends at {}", trainer_, task_.id(), next_,
                   records_.size());
    }
    task_first_ = next_;
    task_start_ = Now();
    last_report_ = task_start_;
    pass_ = task_.pass();
    have_task_ = true;
    return true;
  }

  // Reads task `t`'s records into f->buffers and f->records.
  static Status Load(const master::Task& t, const std::string& dir, const std::string& dataset, Fetched* f) {
    f->buffers.resize(t.chunks_size());
    f->records.clear();
    auto& records = f->records;
    std::vector<std::string_view> recs;
    for (int i = 0; i < t.chunks_size(); ++i) {
      const auto& c = t.chunks(i);
      recordio::ChunkInfo expect;
      expect.records = c.records();
      expect.bytes = c.bytes();
      expect.crc = c.crc();
      std::string part = dataset::Manifest::PartName(c.part());
      std::string name = dataset + "/" + part + " chunk " + std::to_string(c.index()) + " at offset " +
                         std::to_string(c.offset());
      auto& [stored, scratch] = f->buffers[i];
      TESSERA_RETURN_IF_ERROR(
          recordio::ReadChunkAt(dir + "/" + part, c.offset(), &expect, name, &stored, &scratch, &recs));
      records.insert(records.end(), recs.begin(), recs.end());
    }
    if (t.records() > 0) {  // a record range of its one chunk
      if (t.chunks_size() != 1 || t.first_record() < 0 ||
          t.first_record() + t.records() > static_cast<int64_t>(records.size())) {
        return Status::InvalidArgument("task " + std::to_string(t.id()) + " names records " +
                                       std::to_string(t.first_record()) + ".." +
                                       std::to_string(t.first_record() + t.records()) + " of a chunk of " +
                                       std::to_string(records.size()));
      }
      records.erase(records.begin() + t.first_record() + t.records(), records.end());
      records.erase(records.begin(), records.begin() + t.first_record());
    }
    return Status::OK();
  }

  ReaderOptions options_;
  // Its own etcd client, or its trainer's (which outlives it); an own one goes last, after the
  // keeper and the master client.
  std::unique_ptr<etcd::EtcdClient> own_etcd_;
  etcd::EtcdClient* etcd_ = nullptr;
  std::unique_ptr<master::MasterClient> master_;
  std::unique_ptr<LeaseKeeper> keeper_;
  std::string trainer_;
  master::Task task_;
  bool have_task_ = false;
  bool finished_ = false;
  int pass_ = 0, passes_ = 0;
  int job_pass_ = -1;  // -1 until the master first answered
  std::string record_type_;
  std::vector<std::pair<std::string, std::string>> buffers_;  // per chunk: stored, decompressed
  std::vector<std::pair<std::string, std::string>> spare_;    // the task before's, for the next
  std::vector<std::string_view> records_;
  size_t next_ = 0;
  // The current task's first record to read and when it began; when to fetch the next ahead.
  size_t task_first_ = 0;
  TimePoint task_start_{};
  FetchAheadRule ahead_rule_{0};
  static constexpr std::chrono::milliseconds kProgressEvery{250}, kProgressEveryInTail{25};
  static constexpr std::chrono::milliseconds kProgressDeadline{2000};
  TimePoint last_report_{};
  // The fetch ahead heard "wait": every task of the pass is out, or left for trainers with none.
  std::atomic<bool> tail_{false};
  // How often the master last asked for task progress (0: it did not say). Set by Ask(), which
  // also runs on the fetch-ahead thread.
  mutable std::atomic<int64_t> master_pace_ms_{0};
  // The master's last "wait": whether others held tasks; when to ask again.
  bool others_training_ = false;
  static constexpr std::chrono::milliseconds kAskAgainAfterWait{10};
  TimePoint ask_after_{};
  std::vector<ReaderHeldTask> trained_wait_;
  ReaderStats stats_;
  // Tasks being acknowledged on a thread of their own (TrainedAt without a step).
  std::vector<ReaderHeldTask> acking_tasks_;
  // The threads' results (declared last: they are waited for before the rest goes): the next
  // task, being fetched ahead; the acknowledgement under way.
  std::future<StatusOr<Fetched>> ahead_;
  std::future<StatusOr<Acked>> acking_;
  // A task-progress report on its way, and the task (id, epoch) it is about.
  std::future<StatusOr<master::MasterClient::TaskProgressAnswer>> progress_;
  std::pair<int64_t, int64_t> progress_for_{-1, -1};
  // The record (of that task) not to read before its answer is taken, if the report binds (the
  // one before was answered); the records read when it was sent.
  int64_t progress_until_ = 0;
  TimePoint progress_deadline_{};
  bool progress_binding_ = true;
  int64_t records_at_report_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Reader>> Reader::Open(const ReaderOptions& options) {
  return ReaderImpl::Create(options, nullptr);
}

StatusOr<std::unique_ptr<Reader>> OpenReaderOn(const ReaderOptions& options,
                                               const TrainerConnection& trainer) {
  if (!trainer.etcd) return Status::InvalidArgument("OpenReaderOn: the trainer's etcd client is null");
  return ReaderImpl::Create(options, &trainer);
}

}  // namespace tessera
