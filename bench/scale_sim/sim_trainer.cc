// A trainer's coordination without its compute (see sim_trainer.h).
#include "sim_trainer.h"

#include "client/job_connection.h"
#include "client/master_client.h"
#include "client/progress_reporter.h"
#include "client/reader_on.h"
#include "client/trainer_membership.h"
#include "common/strings.h"
#include "tessera/reader.h"

namespace tessera::bench {

SimTrainer::SimTrainer(SimTrainerOptions options) : o_(std::move(options)) {}

SimTrainer::~SimTrainer() {
  Stop();
  Join();
}

void SimTrainer::Start() {
  started_ms_ = WallMillis();
  thread_ = std::thread([this] { Run(); });
}

void SimTrainer::Stop() { stop_ = true; }

void SimTrainer::Join() {
  if (thread_.joinable()) thread_.join();
}

Status SimTrainer::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

int64_t SimTrainer::PserverEpoch(int index) const {
  std::shared_ptr<PserverDirectory> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    d = directory_;
  }
  if (!d) return 0;
  auto a = d->Resolve(index, Deadline(std::chrono::milliseconds(0)));
  return a.ok() ? a->epoch : 0;
}

void SimTrainer::Run() {
  Status s = Train();
  std::lock_guard<std::mutex> lock(mu_);
  error_ = s;
  directory_.reset();
  done_ = true;
}

Status SimTrainer::Train() {
  ConnectionOptions c;
  c.etcd_endpoints = Split(o_.etcd, ',');
  c.job = o_.job;
  // The Client's connection: membership, the pservers' directory, progress reports.
  TESSERA_ASSIGN_OR_RETURN(JobConnection job, ConnectJob(c, std::chrono::seconds(30)));
  phase_ms_[kConnected] = WallMillis();
  TrainerMembership::Options mo;
  mo.job = o_.job;
  mo.transport = "tcp";
  mo.lease_ttl_seconds = o_.lease_ttl_seconds;
  mo.trainer_id = o_.trainer_id;
  TESSERA_ASSIGN_OR_RETURN(auto member, TrainerMembership::Join(job.etcd.get(), mo, ClientLimits{}));
  phase_ms_[kRegistered] = WallMillis();
  auto directory = std::make_shared<PserverDirectory>(job.etcd.get(), o_.job, o_.pservers);
  {
    std::lock_guard<std::mutex> lock(mu_);
    directory_ = directory;
  }
  // The directory's watches use the etcd client: it goes before the client does, however this
  // returns (the harness's reference too).
  struct Forget {
    SimTrainer* self;
    ~Forget() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->directory_.reset();
    }
  } forget{this};
  TESSERA_RETURN_IF_ERROR(directory->WaitAllReady(Deadline(std::chrono::seconds(120))));
  phase_ms_[kPserversReady] = WallMillis();
  master::MasterClient master(job.etcd.get(), o_.job, job.config.token, job.secret);
  master::ProgressReporter progress(&master, member->id());
  // The Reader, on this trainer's etcd connection, as the Python module and the built-in trainer
  // open it (api::Session).
  ReaderOptions ro;
  ro.connection = c;
  ro.trainer_id = member->id();
  ro.store = o_.store;
  TESSERA_ASSIGN_OR_RETURN(auto reader, OpenReaderOn(ro, {job.etcd.get(), job.config, job.secret, job.tls}));
  phase_ms_[kReaderOpen] = WallMillis();
  std::string rec;
  int64_t step = 0, in_batch = 0;
  // Bounded by the job's passes (the reader finishes) and by Stop().
  while (!stop_ && !reader->finished() && !member->lost()) {
    TESSERA_ASSIGN_OR_RETURN(bool more, reader->Next(&rec));
    if (more) {
      if (first_record_ms_ == 0) first_record_ms_ = WallMillis();
      records_.fetch_add(1);
      if (++in_batch < o_.batch) continue;
    }
    // A step: the batch (or an empty one while others hold the pass's last tasks).
    std::this_thread::sleep_for(o_.step);
    TESSERA_RETURN_IF_ERROR(reader->Trained());
    const ReaderStats stats = reader->stats();
    tasks_done_ = stats.tasks_done;
    tasks_stale_ = stats.stale;
    const auto held = reader->Held();
    task_left_ = held.empty() ? 0 : held.back().records - held.back().offset;
    progress.Add(in_batch, 0.5 * static_cast<double>(in_batch), ++step, reader->pass());
    in_batch = 0;
  }
  if (member->lost()) return member->LostStatus();
  progress.FlushPending();
  member->Leave();
  return Status::OK();
}

}  // namespace tessera::bench
