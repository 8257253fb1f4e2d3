// Reader implementation (see include/tessera/reader.h).
#include "tessera/reader.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "client/job_connection.h"
#include "client/master_client.h"
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
  static StatusOr<std::unique_ptr<Reader>> Create(const ReaderOptions& o) {
    std::unique_ptr<ReaderImpl> r(new ReaderImpl());
    r->options_ = o;
    TESSERA_ASSIGN_OR_RETURN(JobConnection job, ConnectJob(o.connection, o.connect_timeout));
    r->etcd_ = std::move(job.etcd);
    r->trainer_ = o.trainer_id;
    if (r->trainer_.empty()) {
      // A reader on its own registers a trainer id, so the master can return its tasks if it dies.
      TESSERA_ASSIGN_OR_RETURN(r->keeper_, LeaseKeeper::Start(r->etcd_.get(), {o.lease_ttl_seconds, {}}));
      Registry reg(r->etcd_.get(), keys::TrainerPrefix(o.connection.job));
      nlohmann::json info = {{"pid", static_cast<int64_t>(::getpid())}, {"reader", true}};
      TESSERA_ASSIGN_OR_RETURN(Claim claim, reg.ClaimLowestFree(info.dump(), r->keeper_->id()));
      r->trainer_ = std::to_string(claim.index);
    }
    r->master_ = std::make_unique<master::MasterClient>(r->etcd_.get(), o.connection.job, job.config.token,
                                                        job.secret, job.tls);
    return std::unique_ptr<Reader>(std::move(r));
  }

  StatusOr<bool> Next(std::string* record) override {
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
    MaybeReportProgress();
    record->assign(records_[next_++]);
    ++stats_.records;
    return true;
  }

  Status Trained() override { return TrainedAt(-1); }

  Status TrainedAt(int64_t step) override {
    // A task is acknowledged once all its records were handed out and trained.
    for (const auto& t : trained_wait_) {
      TESSERA_ASSIGN_OR_RETURN(bool accepted, master_->Finish(trainer_, t.task, t.epoch,
                                                              Deadline(options_.request_timeout), step));
      if (accepted) {
        ++stats_.tasks_done;
      } else {
        ++stats_.stale;
      }
    }
    trained_wait_.clear();
    return Status::OK();
  }

  std::vector<ReaderHeldTask> Held() const override {
    std::vector<ReaderHeldTask> out = trained_wait_;
    if (have_task_) {
      out.push_back(ReaderHeldTask{task_.id(), task_.epoch(), task_.pass(), static_cast<int64_t>(next_),
                                   static_cast<int64_t>(records_.size())});
    }
    return out;
  }

  bool finished() const override { return finished_; }
  int pass() const override { return pass_; }
  int passes() const override { return passes_; }
  int job_pass() const override { return job_pass_; }
  const std::string& record_type() const override { return record_type_; }
  ReaderStats stats() const override { return stats_; }
  std::pair<int64_t, int64_t> current_task() const override { return {task_.id(), task_.epoch()}; }

 private:
  ReaderImpl() = default;

  // Every so often, tells the master how far we are in the task; if it split the rest off for
  // an idle trainer, we stop where it says. (A lost answer at worst trains the rest twice.)
  void MaybeReportProgress() {
    if (!have_task_ || Now() < next_report_) return;
    next_report_ = Now() + kProgressEvery;
    auto end =
        master_->ReportTaskProgress(trainer_, task_.id(), task_.epoch(), static_cast<int64_t>(next_),
                                    static_cast<int64_t>(records_.size()), Deadline(std::chrono::seconds(2)));
    if (!end.ok()) {
      spdlog::debug("trainer {}: task progress not reported: {}", trainer_, end.status().message());
      return;
    }
    if (*end > static_cast<int64_t>(next_) && *end < static_cast<int64_t>(records_.size())) {
      spdlog::info("trainer {}: task {} stops at record {} of {}; an idle trainer has the rest", trainer_,
                   task_.id(), *end, records_.size());
      records_.resize(static_cast<size_t>(*end));
      ++stats_.splits;
    }
  }

  // Gets the next task and loads its records. False when every pass is done (finished_) or the
  // master has nothing to hand out right now.
  StatusOr<bool> FetchTask() {
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(auto reply, master_->GetTask(trainer_, Deadline(options_.request_timeout)));
      passes_ = reply.passes();
      record_type_ = reply.record_type();
      if (reply.kind() == master::GetTaskReply::FINISHED) {
        finished_ = true;
        job_pass_ = passes_;
        return false;
      }
      job_pass_ = std::max(job_pass_,
                           reply.kind() == master::GetTaskReply::TASK ? reply.task().pass() : reply.pass());
      // Other trainers hold the rest of the pass: the caller keeps stepping and asks again.
      if (reply.kind() == master::GetTaskReply::WAIT) return false;
      Deadline deadline(options_.request_timeout);
      std::string dir = options_.store.empty() ? reply.dataset_dir() : options_.store + "/" + reply.dataset();
      Status loaded = Load(reply.task(), dir, reply.dataset());
      if (loaded.ok()) {
        task_ = reply.task();
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
        next_report_ = Now() + kProgressEvery;
        pass_ = task_.pass();
        have_task_ = true;
        return true;
      }
      // A chunk we cannot read fails the task, with the reason, and we move on.
      spdlog::warn("trainer {}: task {} failed: {}", trainer_, reply.task().id(), loaded.message());
      ++stats_.tasks_failed;
      (void)master_->Fail(trainer_, reply.task().id(), reply.task().epoch(), loaded.message(), deadline);
    }
  }

  Status Load(const master::Task& t, const std::string& dir, const std::string& dataset) {
    buffers_.resize(t.chunks_size());
    records_.clear();
    next_ = 0;
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
      auto& [stored, scratch] = buffers_[i];
      TESSERA_RETURN_IF_ERROR(
          recordio::ReadChunkAt(dir + "/" + part, c.offset(), &expect, name, &stored, &scratch, &recs));
      records_.insert(records_.end(), recs.begin(), recs.end());
    }
    if (t.records() > 0) {  // a record range of its one chunk
      if (t.chunks_size() != 1 || t.first_record() < 0 ||
          t.first_record() + t.records() > static_cast<int64_t>(records_.size())) {
        return Status::InvalidArgument("task " + std::to_string(t.id()) + " names records " +
                                       std::to_string(t.first_record()) + ".." +
                                       std::to_string(t.first_record() + t.records()) + " of a chunk of " +
                                       std::to_string(records_.size()));
      }
      records_.erase(records_.begin() + t.first_record() + t.records(), records_.end());
      records_.erase(records_.begin(), records_.begin() + t.first_record());
    }
    return Status::OK();
  }

  ReaderOptions options_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::unique_ptr<LeaseKeeper> keeper_;
  std::string trainer_;
  std::unique_ptr<master::MasterClient> master_;
  master::Task task_;
  bool have_task_ = false;
  bool finished_ = false;
  int pass_ = 0, passes_ = 0;
  int job_pass_ = -1;  // -1 until the master first answered
  std::string record_type_;
  std::vector<std::pair<std::string, std::string>> buffers_;  // per chunk: stored, decompressed
  std::vector<std::string_view> records_;
  size_t next_ = 0;
  static constexpr std::chrono::milliseconds kProgressEvery{250};
  TimePoint next_report_{};
  std::vector<ReaderHeldTask> trained_wait_;
  ReaderStats stats_;
};

}  // namespace

StatusOr<std::unique_ptr<Reader>> Reader::Open(const ReaderOptions& options) {
  return ReaderImpl::Create(options);
}

}  // namespace tessera
