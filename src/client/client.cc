// Client implementation (see include/tessera/client.h): registration, initialization under an
// etcd lock, the join-step agreement, and dispatch of one request per pserver per operation.
#include "tessera/client.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <latch>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/handle_state.h"
#include "client/pserver_directory.h"
#include "client/pserver_link.h"
#include "client/request_builder.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/strings.h"
#include "coord/election.h"
#include "coord/keys.h"
#include "coord/lease_keeper.h"
#include "coord/registry.h"
#include "job/job_store.h"
#include "job/wire_convert.h"
#include "transport/endpoint_choice.h"

namespace tessera {

// ---- Handle -----------------------------------------------------------------------------------

Status Handle::Wait() const {
  if (!state_) return Status::OK();
  bool pending;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    pending = state_->remaining > 0;
  }
  if (pending && state_->help) state_->help();
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->remaining <= 0; });
  return state_->status.ok() ? state_->outcome : state_->status;
}

bool Handle::skipped() const { return state_ && state_->skipped; }

bool Handle::done() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->remaining <= 0;
}

int64_t Handle::version() const {
  if (!state_) return -1;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->version == INT64_MAX ? -1 : state_->version;
}

int64_t Handle::min_clock() const {
  if (!state_) return -1;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->min_clock == INT64_MAX ? -1 : state_->min_clock;
}

namespace {

std::string Hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

class ClientImpl : public Client, public PserverLink::Owner {
 public:
  ~ClientImpl() override { (void)Close(); }

  static StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& o) {
    TESSERA_RETURN_IF_ERROR(ValidateName(o.job, "job"));
    if (o.etcd_endpoints.empty()) return Status::InvalidArgument("no etcd endpoint given");
    if (!o.trainer_id.empty()) TESSERA_RETURN_IF_ERROR(ValidateName(o.trainer_id, "trainer id"));
    std::unique_ptr<ClientImpl> c(new ClientImpl());
    c->options_ = o;
    TESSERA_ASSIGN_OR_RETURN(c->transport_.wanted, ParseTransportKind(o.transport));
    c->transport_.host_id = HostIdentity();
    etcd::EtcdOptions eo;
    eo.endpoints = o.etcd_endpoints;
    eo.username = o.etcd_username;
    eo.password = o.etcd_password;
    eo.tls = o.etcd_tls || !o.etcd_ca_file.empty();
    eo.ca_file = o.etcd_ca_file;
    TESSERA_ASSIGN_OR_RETURN(c->etcd_, etcd::EtcdClient::Create(eo));
    TESSERA_RETURN_IF_ERROR(c->etcd_->CheckReachable(o.connect_timeout));
    TESSERA_ASSIGN_OR_RETURN(c->job_, LoadJobConfig(c->etcd_.get(), o.job));
    TESSERA_ASSIGN_OR_RETURN(c->slots_, LoadSlotMap(c->etcd_.get(), o.job));
    ClientImpl* self = c.get();
    TESSERA_ASSIGN_OR_RETURN(
        c->keeper_, LeaseKeeper::Start(c->etcd_.get(), {o.lease_ttl_seconds, {}}, [self](LeaseState st) {
          if (st != LeaseState::kLost || self->lease_lost_.exchange(true)) return;
          spdlog::error(
              "trainer {}'s lease was lost (etcd did not hear from it within {} s): the job "
              "now counts it as gone; restart the trainer to take part again",
              self->id_, self->options_.lease_ttl_seconds);
        }));
    TESSERA_RETURN_IF_ERROR(c->Register());
    // A library must not write to the program's stdout: unless the program installed its own
    // logger, log to stderr with the job and trainer on every line.
    if (spdlog::default_logger()->name().empty()) {
      LogOptions lo;
      lo.job = o.job;
      lo.node = "trainer-" + c->id_;
      (void)InitLogging(lo);
    }
    c->builder_ = std::make_unique<RequestBuilder>(c->job_, c->slots_);
    c->directory_ = std::make_unique<PserverDirectory>(c->etcd_.get(), o.job, c->job_.pservers);
    for (int i = 0; i < c->job_.pservers; ++i) {
      c->links_.push_back(std::make_shared<PserverLink>(i, c->directory_.get(), c.get(), &c->transport_));
    }
    return std::unique_ptr<Client>(std::move(c));
  }

  Status AddDense(const std::string& name, float* values, size_t size, const OptimizerConfig* opt) override {
    if (initialized_) return Status::FailedPrecondition("declare parameters before Initialize()");
    return builder_->AddDense(name, values, size, opt ? *opt : job_.optimizer);
  }

  Status AddSparse(const std::string& name, int dim, const InitializerConfig& init,
                   const OptimizerConfig* opt) override {
    if (initialized_) return Status::FailedPrecondition("declare parameters before Initialize()");
    return builder_->AddSparse(name, dim, init, opt ? *opt : job_.optimizer);
  }

  Status Initialize() override {
    Deadline d(options_.request_timeout);
    Status joined = Status::OK();
    // A pserver may be replaced while this runs (seen ready, then gone): start over, a few times.
    for (int round = 0; round < 5 && !d.expired(); ++round) {
      TESSERA_RETURN_IF_ERROR(directory_->WaitAllRegistered(d));
      TESSERA_RETURN_IF_ERROR(InitializePservers(d));
      TESSERA_RETURN_IF_ERROR(directory_->WaitAllReady(d));
      joined = JoinAll(d);
      if (joined.ok() || directory_->AllReady()) break;
    }
    TESSERA_RETURN_IF_ERROR(joined);
    initialized_ = true;
    RecordTransports();
    spdlog::info("trainer {} joined {} pservers at step {} (mode {}, transport {})", id_, links_.size(),
                 step_.load(), job_.mode.ToString(), TransportsText());
    return Status::OK();
  }

  Handle Pull() override {
    if (lease_lost_) return Failed(LeaseLost());
    if (Status s = Realign(); !s.ok()) return Failed(s);
    auto calls = NewCalls();
    builder_->AddDensePull(&calls);
    for (auto& c : calls) c->req.set_need(PullNeed(step_));
    return Dispatch(std::move(calls), /*all=*/false);
  }

  Handle Push(const Gradients& grads) override { return DoPush(grads, /*pull=*/false); }
  Handle PushPull(const Gradients& grads) override { return DoPush(grads, /*pull=*/true); }

  Handle SparsePull(const std::string& table, std::span<const uint64_t> keys, float* out) override {
    auto calls = NewCalls();
    Status s = builder_->AddSparsePull(table, keys, out, &calls);
    if (!s.ok()) return Failed(s);
    for (auto& c : calls) c->req.set_need(PullNeed(step_));
    return Dispatch(std::move(calls), /*all=*/false);
  }

  StatusOr<int> SparseDim(const std::string& table) const override {
    for (const auto& t : builder_->sparse()) {
      if (t.name == table) return t.dim;
    }
    return Status::NotFound("sparse table '" + table + "' was not declared");
  }

  int64_t step() const override { return step_.load(); }
  const std::string& trainer_id() const override { return id_; }
  int num_pservers() const override { return job_.pservers; }
  ConsistencyMode mode() const override { return job_.mode; }

  Status WaitForTrainers(int n, std::chrono::milliseconds timeout) override {
    auto watch = Registry(etcd_.get(), keys::TrainerPrefix(options_.job)).Watch(nullptr);
    Deadline d(timeout);
    bool ok = false;
    while (!ok && !d.expired()) {
      if (lease_lost_) return LeaseLost();
      ok = watch->WaitFor([n](const MemberList& l) { return static_cast<int>(l.members.size()) >= n; },
                          std::min<std::chrono::milliseconds>(d.remaining(), std::chrono::milliseconds(500)));
    }
    MemberList seen = watch->Snapshot();
    watch->Cancel();
    if (!ok) {
      std::vector<std::string> names;
      for (const auto& m : seen.members) names.push_back(m.name);
      return Status::DeadlineExceeded("fewer than " + std::to_string(n) +
                                      " trainers registered in time (saw " +
                                      std::to_string(seen.members.size()) + " [" + Join(names, ",") +
                                      "] at revision " + std::to_string(seen.revision) + ")");
    }
    return Status::OK();
  }

  Status Close() override {
    if (closed_) return Status::OK();
    closed_ = true;
    // Deregistering is the goodbye: every pserver watches the trainers' keys and takes this
    // trainer out of its group at once (no request that could hang on a dead pserver).
    if (directory_) directory_->Interrupt();
    for (auto& l : links_) l->Close();
    links_.clear();
    directory_.reset();
    if (keeper_) {
      nlohmann::json left = {{"pid", static_cast<int64_t>(::getpid())}, {"epoch", epoch_}};
      (void)Registry(etcd_.get(), keys::TrainerPrefix(options_.job))
          .Deregister(id_, epoch_, {etcd::Op::Put(keys::TrainerLeft(options_.job, id_), left.dump())});
      (void)keeper_->Revoke();
    }
    return Status::OK();
  }

  // ---- PserverLink::Owner ----

  void Stamp(wire::DataRequest* req) override {
    req->set_job_token(job_.token);
    req->set_trainer(id_);
    req->set_trainer_epoch(epoch_);
    req->set_allow_nonfinite(options_.allow_nonfinite);
  }

  Status Reinitialize(PserverLink& link, const Deadline& d, int64_t step) override {
    if (!directory_->Ready(link.index())) {
      spdlog::warn(
          "pserver {} restarted without its parameters; re-initializing it from trainer {}'s copy at step {} "
          "(optimizer state and sparse rows on it start over)",
          link.index(), id_, step);
      TESSERA_RETURN_IF_ERROR(InitPserver(link, d, step));
    }
    return Rejoin(link, d, step);
  }

  Status Rejoin(PserverLink& link, const Deadline& d, int64_t step) override {
    LinkCall call;
    call.req.set_op(wire::DataRequest::JOIN);
    call.req.set_step(step);
    return link.Run(call, d, /*recover=*/false).status();
  }

 private:
  ClientImpl() = default;

  // "shm" when every pserver is reached over shared memory, else "0:shm,1:tcp".
  std::string TransportsText() const {
    std::vector<std::string> each;
    for (const auto& l : links_) each.push_back(l->transport_name());
    if (std::all_of(each.begin(), each.end(), [&](const std::string& t) { return t == each[0]; }))
      return each.empty() ? "" : each[0];
    std::string out;
    for (size_t i = 0; i < each.size(); ++i) out += (i ? "," : "") + std::to_string(i) + ":" + each[i];
    return out;
  }

  // Adds the transport used to each pserver to this trainer's registration (`tessera status`
  // shows it). Best effort: a failure is logged, training goes on.
  void RecordTransports() {
    nlohmann::json used = nlohmann::json::object();
    for (const auto& l : links_) used[std::to_string(l->index())] = l->transport_name();
    if (used == info_["transport"]) return;
    info_["transport"] = used;
    Status s = Registry(etcd_.get(), keys::TrainerPrefix(options_.job)).Update(id_, info_.dump(), epoch_, keeper_->id());
    if (!s.ok()) spdlog::warn("trainer {}: could not record its transports in etcd: {}", id_, s.ToString());
  }

  Status Register() {
    Registry reg(etcd_.get(), keys::TrainerPrefix(options_.job));
    info_ = {{"host", Hostname()},
             {"pid", static_cast<int64_t>(::getpid())},
             {"started_ms", WallMillis()},
             {"transport_wanted", options_.transport}};
    const nlohmann::json& info = info_;
    if (!options_.trainer_id.empty()) {
      // A restarted trainer may find its predecessor's key still there until that lease expires:
      // wait for it (a live trainer with the same id is refused at once).
      Deadline deadline(options_.request_timeout);
      while (true) {
        auto e = reg.Register(options_.trainer_id, info.dump(), keeper_->id());
        if (e.ok()) {
          id_ = options_.trainer_id;
          epoch_ = *e;
          return Status::OK();
        }
        Status refused =
            e.status().WithContext("trainer id '" + options_.trainer_id + "' of job '" + options_.job + "'");
        if (e.status().code() != StatusCode::kAlreadyExists && e.status().code() != StatusCode::kAborted)
          return refused;
        auto kv = etcd_->Get(keys::Trainer(options_.job, options_.trainer_id));
        if (!kv.ok()) return kv.status();
        if (!kv->kvs.empty()) {
          auto ttl = etcd_->LeaseTimeToLive(kv->kvs[0].lease);
          if (!ttl.ok()) return ttl.status();
          // Only a short remaining lease belongs to a dead predecessor worth waiting for.
          if (ttl->ttl_seconds > 2 * options_.lease_ttl_seconds + 5 || deadline.expired()) return refused;
          if (ttl->ttl_seconds > 0) {
            spdlog::info(
                "trainer id {} is still registered by a previous process; waiting {} s for its lease",
                options_.trainer_id, ttl->ttl_seconds);
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
    }
    TESSERA_ASSIGN_OR_RETURN(Claim claim, reg.ClaimLowestFree(info.dump(), keeper_->id()));
    id_ = std::to_string(claim.index);
    epoch_ = claim.epoch;
    return Status::OK();
  }

  // Runs fn on every link's thread in parallel; returns the first error.
  Status OnEveryLink(const std::function<Status(PserverLink&)>& fn) {
    std::vector<Status> results(links_.size());
    std::latch done(static_cast<std::ptrdiff_t>(links_.size()));
    for (size_t i = 0; i < links_.size(); ++i) {
      links_[i]->Post([&, i] {
        results[i] = fn(*links_[i]);
        done.count_down();
      });
    }
    done.wait();
    for (const auto& s : results) {
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  bool AnyReady() const {
    for (int i = 0; i < job_.pservers; ++i) {
      if (directory_->Ready(i)) return true;
    }
    return false;
  }

  // Makes every pserver ready: a fresh job's pservers get this trainer's initial values (one
  // trainer does it, under the init lock); a pserver replaced mid-job is restored by the trainers
  // that were training (they hold current values), and only if none does in a grace period does
  // this trainer restore it itself.
  Status InitializePservers(const Deadline& d) {
    if (directory_->AllReady()) return Status::OK();
    if (AnyReady()) {
      auto grace = std::chrono::seconds(3 * options_.lease_ttl_seconds + 5);
      Deadline g(std::min<std::chrono::milliseconds>(grace, d.remaining()));
      if (directory_->WaitAllReady(g).ok()) return Status::OK();
    }
    Election lock(etcd_.get(), keys::InitLockPrefix(options_.job), keeper_->id());
    Status won = lock.Campaign(id_, [&] { return directory_->AllReady() || d.expired(); });
    if (won.code() == StatusCode::kCancelled) return Status::OK();  // another trainer did it
    TESSERA_RETURN_IF_ERROR(won);
    Status s = InitializeUnready(d);
    (void)lock.Resign();
    return s;
  }

  // Initializes every pserver that is not ready. REQUIRES: holding the init lock.
  Status InitializeUnready(const Deadline& d) {
    // The lock may come after whoever held it made every pserver ready: nothing to do then (and
    // the restore path below must not run: its pull could wait for this very trainer to join).
    // (The directory follows etcd through a watch: give it a moment to catch up first.)
    if (directory_->WaitAllReady(Deadline(std::chrono::seconds(1))).ok()) return Status::OK();
    int64_t version = step_.load();
    int ready = -1;
    for (int i = 0; i < job_.pservers && ready < 0; ++i) {
      if (directory_->Ready(i)) ready = i;
    }
    if (ready >= 0) {
      // A pserver lost its parameters and no trainer restored them: start it at the others'
      // version (so steps line up) with the current values of everything the others hold and
      // this trainer's initial values for the rest. Checkpoints avoid this loss.
      LinkCall describe;
      describe.req.set_op(wire::DataRequest::DESCRIBE);
      StatusOr<wire::DataReply> r = Status::Unavailable("");
      std::latch done(1);
      links_[ready]->Post([&] {
        r = links_[ready]->Run(describe, d, /*recover=*/false);
        done.count_down();
      });
      done.wait();
      TESSERA_RETURN_IF_ERROR(r.status());
      version = r->version();
      step_ = version;
      auto calls = NewCalls();
      builder_->AddDensePull(&calls);
      for (int i = 0; i < job_.pservers; ++i) {
        if (!directory_->Ready(i)) calls[i] = std::make_unique<LinkCall>();  // nothing to pull there
        calls[i]->req.set_need(PullNeed(version));
      }
      TESSERA_RETURN_IF_ERROR(Dispatch(std::move(calls), /*all=*/false, /*recover=*/false).Wait());
    }
    return OnEveryLink([&](PserverLink& link) -> Status {
      if (directory_->Ready(link.index())) return Status::OK();
      if (ready >= 0) {
        spdlog::warn(
            "pserver {} lost its parameters and no trainer had a copy: re-initializing it at version {} "
            "(current values from the other pservers, initial values for its own; enable checkpoints "
            "to avoid this)",
            link.index(), version);
      }
      return InitPserver(link, d, version);
    });
  }

  Status InitPserver(PserverLink& link, const Deadline& d, int64_t step) {
    LinkCall init;
    builder_->BuildInit(link.index(), &init);
    init.req.set_step(step);
    TESSERA_RETURN_IF_ERROR(link.Run(init, d, /*recover=*/false).status());
    LinkCall done;
    done.req.set_op(wire::DataRequest::INIT_DONE);
    return link.Run(done, d, /*recover=*/false).status();
  }

  // Every pserver must agree on the step this trainer starts at: ask with the largest answer
  // until all give the same one.
  Status JoinAll(const Deadline& d) {
    int64_t requested = step_.load();
    for (int round = 0; round < 10; ++round) {
      std::vector<int64_t> starts(links_.size(), -1);
      TESSERA_RETURN_IF_ERROR(OnEveryLink([&](PserverLink& link) -> Status {
        LinkCall call;
        call.req.set_op(wire::DataRequest::JOIN);
        call.req.set_step(requested);
        TESSERA_ASSIGN_OR_RETURN(wire::DataReply r, link.Run(call, d, /*recover=*/false));
        starts[link.index()] = r.start_step();
        return Status::OK();
      }));
      int64_t top = *std::max_element(starts.begin(), starts.end());
      if (std::all_of(starts.begin(), starts.end(), [&](int64_t s) { return s == top; })) {
        step_ = top;
        return Status::OK();
      }
      requested = top;
    }
    return Status::Aborted("pservers did not agree on a start step in 10 rounds");
  }

  int64_t PullNeed(int64_t step) const { return job_.mode.kind == ConsistencyMode::Kind::kAsync ? 0 : step; }

  std::vector<std::unique_ptr<LinkCall>> NewCalls() const {
    std::vector<std::unique_ptr<LinkCall>> calls;
    for (int i = 0; i < job_.pservers; ++i) calls.push_back(std::make_unique<LinkCall>());
    return calls;
  }

  Handle Failed(const Status& s) {
    auto state = std::make_shared<Handle::State>(1);
    state->Complete(s, 0, 0);
    return Handle(state);
  }

  Handle DoPush(const Gradients& grads, bool pull) {
    if (!initialized_) return Failed(Status::FailedPrecondition("call Initialize() before pushing"));
    if (lease_lost_) return Failed(LeaseLost());
    if (Status s = Realign(); !s.ok()) return Failed(s);
    auto calls = NewCalls();
    Status s = builder_->AddPush(grads, &calls);
    if (!s.ok()) return Failed(s);
    int64_t step = step_.load();
    // Sync and ssp: every pserver hears from every trainer every step (empty pushes too).
    bool all = job_.mode.kind != ConsistencyMode::Kind::kAsync;
    Status outcome;
    std::string bad = options_.allow_nonfinite ? "" : builder_->FindNonFinite(grads);
    if (!bad.empty()) {
      // Nothing of this gradient is sent anywhere; the step goes on without it everywhere.
      outcome = DropGradient("gradient for " + bad + " is not finite (NaN or infinity)", step);
      calls = NewCalls();
      builder_->AddSkippedPush("gradient for " + bad + " is not finite (NaN or infinity)", &calls);
      all = true;
    } else {
      nonfinite_in_a_row_ = 0;
    }
    if (pull) builder_->AddDensePull(&calls);
    for (auto& c : calls) {
      c->req.set_step(step);
      if (pull) c->req.set_need(PullNeed(step + 1));
    }
    Handle h = Dispatch(std::move(calls), all, /*recover=*/true, bad.empty() ? nullptr : &outcome);
    RaiseStep(step + 1);
    return h;
  }

  // A gradient of this trainer's step is dropped (`why`): logs it and returns what the push then
  // says, by the job's policy.
  Status DropGradient(const std::string& why, int64_t step) {
    ++nonfinite_in_a_row_;
    spdlog::warn("trainer {} step {}: {}; the step goes on without this trainer's gradient (policy {})", id_, step,
                 why, NonFinitePolicyName(job_.nonfinite));
    if (job_.nonfinite == NonFinitePolicy::kError) {
      return Status::InvalidArgument(why + "; the step went on without this trainer's gradient (the job's "
                                           "non-finite policy is error)");
    }
    if (nonfinite_in_a_row_ >= kMaxNonFiniteInARow) {
      return Status::InvalidArgument(std::to_string(nonfinite_in_a_row_) +
                                     " steps in a row had gradients with NaN or infinity (the last: " + why +
                                     "): the model has probably diverged; lower the learning rate or check the data");
    }
    return Status::OK();
  }

  // `dropped`: the push stands for a dropped gradient; Wait() says this once the rest succeeded.
  Handle Dispatch(std::vector<std::unique_ptr<LinkCall>> calls, bool all, bool recover = true,
                  const Status* dropped = nullptr) {
    std::vector<int> targets;
    for (int i = 0; i < static_cast<int>(calls.size()); ++i) {
      const auto& r = calls[i]->req;
      if (all || r.push_size() > 0 || r.pull_size() > 0) targets.push_back(i);
    }
    auto state = std::make_shared<Handle::State>(static_cast<int>(targets.size()));
    if (dropped) {
      state->skipped = true;
      state->outcome = *dropped;
    }
    // A waiter runs the parts no link thread has picked up yet itself (the link's one request at
    // a time still holds); the links are held weakly, a closed client's are gone.
    std::vector<std::pair<std::weak_ptr<PserverLink>, uint64_t>> jobs;
    for (int i : targets) {
      std::shared_ptr<LinkCall> call(std::move(calls[i]));
      uint64_t id = links_[i]->Submit(call, options_.request_timeout, recover,
                                      [this, state](const Status& s, const wire::DataReply& r, int64_t resume) {
                                        if (s.code() == StatusCode::kAborted && resume >= 0) {
                                          RaiseStep(resume);
                                          realign_ = true;
                                        }
                                        state->Complete(s, r.version(), r.min_clock());
                                      });
      jobs.emplace_back(links_[i], id);
    }
    state->help = [jobs = std::move(jobs)] {
      for (const auto& [weak, id] : jobs) {
        if (auto link = weak.lock()) link->RunInline(id);
      }
    };
    return Handle(state);
  }

  Status LeaseLost() const {
    return Status::FailedPrecondition("trainer " + id_ + "'s lease was lost: the job counts it as gone");
  }

  Status Realign() {
    if (!initialized_ || !realign_.exchange(false)) return Status::OK();
    return JoinAll(Deadline(options_.request_timeout));
  }

  void RaiseStep(int64_t to) {
    int64_t cur = step_.load();
    while (cur < to && !step_.compare_exchange_weak(cur, to)) {
    }
  }

  ClientOptions options_;
  PserverLink::Transport transport_;
  nlohmann::json info_;  // this trainer's registration value
  std::unique_ptr<etcd::EtcdClient> etcd_;
  // Set (once) from the lease keeper's thread when the lease is gone: the registration went
  // with it, so every later operation fails and says so (a supervisor restarts the trainer).
  std::atomic<bool> lease_lost_{false};
  std::unique_ptr<LeaseKeeper> keeper_;
  JobConfig job_;
  SlotMap slots_;
  std::string id_;
  int64_t epoch_ = 0;
  std::unique_ptr<RequestBuilder> builder_;
  std::unique_ptr<PserverDirectory> directory_;
  std::vector<std::shared_ptr<PserverLink>> links_;
  std::atomic<int64_t> step_{0};
  // A push was refused on some pserver (the step closed there without us): before the next
  // request, every pserver is told where this trainer goes on, so none waits for a push for a
  // step it skipped.
  std::atomic<bool> realign_{false};
  bool initialized_ = false;
  bool closed_ = false;
  // Steps in a row whose gradient was dropped for holding NaN or infinity.
  int nonfinite_in_a_row_ = 0;
  static constexpr int kMaxNonFiniteInARow = 10;
};

}  // namespace

StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  return ClientImpl::Create(options);
}

}  // namespace tessera
