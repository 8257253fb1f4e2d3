// Client (include/tessera/client.h): connecting, the public operations and their dispatch to one
// request per pserver, and closing. Registration, initialization and the join are in
// client_join.cc; the decisions they take are in client_rules.h.
#include "tessera/client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <latch>

#include "client/client_impl.h"
#include "client/handle_state.h"
#include "client/job_connection.h"
#include "client/wire_coder.h"
#include "common/clock.h"
#include "common/finite.h"
#include "common/logging.h"
#include "common/while_waiting.h"
#include "job/job_store.h"
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

// ---- Connecting -------------------------------------------------------------------------------

ClientImpl::ClientImpl(const ClientOptions& o, const ClientLimits& limits)
    : options_(o), limits_(limits), nonfinite_(NonFinitePolicy::kSkip, limits.max_nonfinite_in_a_row) {}

StatusOr<std::unique_ptr<Client>> ClientImpl::Create(const ClientOptions& o, const ClientLimits& limits) {
  TESSERA_RETURN_IF_ERROR(o.connection.Validate());
  if (!o.trainer_id.empty()) TESSERA_RETURN_IF_ERROR(ValidateName(o.trainer_id, "trainer id"));
  std::unique_ptr<ClientImpl> c(new ClientImpl(o, limits));
  TESSERA_ASSIGN_OR_RETURN(c->transport_.wanted, ParseTransportKind(o.transport));
  c->transport_.host_id = HostIdentity();
  TESSERA_ASSIGN_OR_RETURN(JobConnection job, ConnectJob(o.connection, o.connect_timeout));
  c->etcd_ = std::move(job.etcd);
  c->job_ = job.config;
  c->transport_.options.secret = job.secret;
  c->transport_.options.tls = job.tls;
  c->transport_.options.busy_poll = o.busy_poll;
  c->transport_.options.window = c->window_;
  TESSERA_ASSIGN_OR_RETURN(c->slots_, LoadSlotMap(c->etcd_.get(), o.connection.job));
  c->nonfinite_ = NonFiniteStreak(c->job_.nonfinite, limits.max_nonfinite_in_a_row);
  TESSERA_ASSIGN_OR_RETURN(
      c->member_, TrainerMembership::Join(c->etcd_.get(),
                                          {.job = o.connection.job,
                                           .trainer_id = o.trainer_id,
                                           .transport = o.transport,
                                           .lease_ttl_seconds = static_cast<int>(o.lease_ttl_seconds),
                                           .wait_for_predecessor = o.request_timeout},
                                          limits));
  // A library must not write to the program's stdout: unless the program installed its own
  // logger, log to stderr with the job and trainer on every line.
  if (spdlog::default_logger()->name().empty()) {
    LogOptions lo;
    lo.job = o.connection.job;
    lo.node = "trainer-" + c->member_->id();
    (void)InitLogging(lo);
  }
  c->builder_ = std::make_unique<RequestBuilder>(c->job_, c->slots_);
  if (!c->job_.wire.plain())
    c->transport_.coder = std::make_shared<WireCoder>(*c->builder_, c->job_.wire, c->job_.block_size);
  c->directory_ = std::make_unique<PserverDirectory>(c->etcd_.get(), o.connection.job, c->job_.pservers);
  c->recovery_ =
      std::make_unique<LinkRecovery>(c->job_, *c->member_, *c->builder_, *c->directory_, o.allow_nonfinite);
  for (int i = 0; i < c->job_.pservers; ++i) {
    c->links_.push_back(
        std::make_shared<PserverLink>(i, c->directory_.get(), c->recovery_.get(), &c->transport_));
  }
  return std::unique_ptr<Client>(std::move(c));
}

StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  return ClientImpl::Create(options);
}

Status ClientImpl::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  if (directory_) directory_->Interrupt();
  for (auto& l : links_) l->Close();
  links_.clear();
  directory_.reset();
  if (member_) member_->Leave();
  return Status::OK();
}

// ---- Parameters and operations ----------------------------------------------------------------

Status ClientImpl::AddDense(const std::string& name, float* values, size_t size, const OptimizerConfig* opt) {
  if (initialized_) return Status::FailedPrecondition("declare parameters before Initialize()");
  return builder_->AddDense(name, values, size, opt ? *opt : job_.optimizer);
}

InPlaceCounts InPlaceCountsNow() {
  const WindowCounters c = WindowCountersNow();
  return {c.requests_in_place, c.replies_in_place, c.renewals};
}

StatusOr<std::span<float>> ClientImpl::DenseMemory(size_t floats) {
  if (initialized_) return Status::FailedPrecondition("take dense memory before Initialize()");
  if (floats == 0) return Status::InvalidArgument("dense memory of 0 floats");
  // With several pservers, two runs as large as the model's memory follow it: the values and the
  // gradients a step moves fit each (ArrivingValues). Address space until a step stages a call.
  const size_t runs = job_.pservers > 1 ? 2 : 0;
  if (floats > kMaxWindowBytes / sizeof(float) / (1 + runs)) {
    return Status::InvalidArgument(
        "dense memory of " + std::to_string(floats) + " floats" +
        (runs ? ", with room to stage it for " + std::to_string(job_.pservers) + " pservers," : "") +
        " is more than " + std::to_string(kMaxWindowBytes) + " bytes");
  }
  const size_t bytes = floats * sizeof(float);
  TESSERA_ASSIGN_OR_RETURN(char* m, window_->Allocate(bytes * (1 + runs)));
  if (runs > 0) staging_ = {m + bytes, m + 2 * bytes, bytes};
  return std::span<float>(reinterpret_cast<float*>(m), floats);
}

Status ClientImpl::AddSparse(const std::string& name, int dim, const InitializerConfig& init,
                             const OptimizerConfig* opt, const TableLimits* limits) {
  if (initialized_) return Status::FailedPrecondition("declare parameters before Initialize()");
  return builder_->AddSparse(name, dim, init, opt ? *opt : job_.optimizer, limits ? *limits : TableLimits{});
}

Handle ClientImpl::Pull() {
  if (member_->lost()) return Handle(Failed(LeaseLost()));
  if (Status s = Realign(); !s.ok()) return Handle(Failed(s));
  auto calls = NewCalls();
  builder_->AddDensePull(&calls);
  for (auto& c : calls) c->req.set_need(PullNeed(step_));
  // A large pull travels in parts, two at a time per pserver: the pserver copies one out of its
  // shard while this process copies the one before into the parameters.
  return Handle(Dispatch(std::move(calls), {.part_bytes = options_.pipeline ? kPartBytes : 0}));
}

Handle ClientImpl::SparsePull(const std::string& table, std::span<const uint64_t> keys, float* out) {
  auto calls = NewCalls();
  Status s = builder_->AddSparsePull(table, keys, out, &calls);
  if (!s.ok()) return Handle(Failed(s));
  for (auto& c : calls) c->req.set_need(PullNeed(step_));
  return Handle(Dispatch(std::move(calls), {}));
}

StatusOr<int> ClientImpl::SparseDim(const std::string& table) const {
  for (const auto& t : builder_->sparse()) {
    if (t.name == table) return t.dim;
  }
  return Status::NotFound("sparse table '" + table + "' was not declared");
}

Status ClientImpl::WaitForTrainers(int n, std::chrono::milliseconds timeout) {
  return member_->WaitForTrainers(n, timeout);
}

Handle ClientImpl::PushPullAndWait(const Gradients& grads) {
  // The caller waits: nothing touches the dense memory until the calls end, so they may go in it.
  ShmWindow::Hold hold(window_.get());
  const int64_t step = step_.load();
  const uint64_t generation = window_->generation();
  std::shared_ptr<ArrivingValues> arriving;
  std::shared_ptr<Handle::State> state = DoPush(grads, PushMode::kPushPullAndWait, nullptr, &arriving);
  Handle h(state);
  Status waited;
  {
    // Work this thread runs beside its call reads the values as they arrive over every call.
    WhileWaiting::Arrivals values(arriving.get());
    waited = h.Wait();
  }
  // What was staged lands in the values (all of it again if a call was sent anew after a failure).
  if (arriving) arriving->Finish(waited.ok(), window_->generation() != generation);
  // Only where the pserver scanned (else DoPush judged the scan itself) does its finding count here.
  const bool pserver_scanned =
      WhoScans(job_, options_.allow_nonfinite, /*waited=*/true) == NonFiniteScan::kPserver;
  if (!waited.ok() || !pserver_scanned) return h;
  if (state->dropped.empty()) {
    nonfinite_.Clean();
    return h;
  }
  // The pserver took the gradient as dropped: its finding, worded as this trainer's own would be
  // (NonFiniteGradient), goes through the same log line and policy.
  Status outcome = DropNonFinite(state->dropped, step);
  std::lock_guard<std::mutex> lock(state->mu);
  state->skipped = true;
  state->outcome = outcome;
  return h;
}

std::string ClientImpl::ScanGradient(const Gradients& grads) const {
  if (options_.allow_nonfinite) return "";
  const std::string where = builder_->FindNonFinite(grads);
  return where.empty() ? "" : NonFiniteGradient(where);
}

Status ClientImpl::DropNonFinite(const std::string& why, int64_t step) {
  spdlog::warn("trainer {} step {}: {}; the step goes on without this trainer's gradient (policy {})",
               member_->id(), step, why, NonFinitePolicyName(job_.nonfinite));
  return nonfinite_.Dropped(why);
}

std::shared_ptr<Handle::State> ClientImpl::DoPush(const Gradients& grads, PushMode mode,
                                                  std::shared_ptr<const void> keep,
                                                  std::shared_ptr<ArrivingValues>* arriving) {
  if (!initialized_) return Failed(Status::FailedPrecondition("call Initialize() before pushing"));
  if (member_->lost()) return Failed(LeaseLost());
  if (Status s = Realign(); !s.ok()) return Failed(s);
  auto calls = NewCalls();
  if (Status s = builder_->AddPush(grads, &calls); !s.ok()) return Failed(s);
  const int64_t step = step_.load();
  const bool pull = mode != PushMode::kPush;
  const NonFiniteScan scan = WhoScans(job_, options_.allow_nonfinite, mode == PushMode::kPushPullAndWait);
  Sending how;
  // Sync and ssp: every pserver hears from every trainer every step (empty pushes too).
  how.all = job_.mode.kind != ConsistencyMode::Kind::kAsync;
  how.caller_waits = mode == PushMode::kPushPullAndWait;
  const std::string why = scan == NonFiniteScan::kTrainer ? ScanGradient(grads) : "";
  if (!why.empty()) {
    // Nothing of this gradient is sent anywhere; the step goes on without it everywhere.
    how.dropped = DropNonFinite(why, step);
    calls = NewCalls();
    builder_->AddSkippedPush(why, &calls);
    how.all = true;
  } else if (scan == NonFiniteScan::kTrainer) {
    nonfinite_.Clean();
  }
  if (pull) builder_->AddDensePull(&calls);
  for (auto& c : calls) {
    c->req.set_step(step);
    if (pull) c->req.set_need(PullNeed(step + 1));
    if (scan == NonFiniteScan::kPserver) c->req.set_nonfinite_skips(true);
    c->owner = keep;
  }
  // An async push of a large model travels in pieces, two at a time per pserver: the pserver
  // applies one while the next arrives; a pull with it follows, in parts, once all are done.
  const bool pieces =
      options_.pipeline && why.empty() && job_.mode.kind == ConsistencyMode::Kind::kAsync && !job_.hosted();
  how.part_bytes = pieces ? kPartBytes : 0;
  // Work waiting beside the step reads the values as they arrive: where they come over several
  // pservers' calls in place, the calls are tracked (and staged where their blocks alternate).
  if (arriving && pull && why.empty() && !pieces && !transport_.coder && staging_.bytes > 0 &&
      window_->held() && WhileWaiting::WantsProgress() && AllOverShm()) {
    *arriving = ArrivingValues::Track(calls, *window_, staging_);
  }
  auto state = Dispatch(std::move(calls), std::move(how));
  RaiseStep(step + 1);
  return state;
}

// Whether every pserver is reached over shared memory now: a call over TCP is never told how far
// its reply has come, and tracking it would only copy its reply once more, through the staging.
bool ClientImpl::AllOverShm() const {
  return std::all_of(links_.begin(), links_.end(),
                     [](const std::shared_ptr<PserverLink>& l) { return l->transport_name() == "shm"; });
}

// ---- Dispatch ---------------------------------------------------------------------------------

Status ClientImpl::OnEveryLink(const std::function<Status(PserverLink&)>& fn) {
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

int64_t ClientImpl::PullNeed(int64_t step) const {
  return job_.mode.kind == ConsistencyMode::Kind::kAsync ? 0 : step;
}

std::vector<std::unique_ptr<LinkCall>> ClientImpl::NewCalls() const {
  std::vector<std::unique_ptr<LinkCall>> calls;
  for (int i = 0; i < job_.pservers; ++i) calls.push_back(std::make_unique<LinkCall>());
  return calls;
}

std::shared_ptr<Handle::State> ClientImpl::Failed(const Status& s) {
  auto state = std::make_shared<Handle::State>(1);
  state->Complete(s, 0, 0);
  return state;
}

std::shared_ptr<Handle::State> ClientImpl::Dispatch(std::vector<std::unique_ptr<LinkCall>> calls,
                                                    Sending how) {
  const size_t part_bytes = how.part_bytes;
  // (link, call, overlap group) for every call sent.
  struct Target {
    int link;
    std::shared_ptr<LinkCall> call;
    uint64_t group;
  };
  std::vector<Target> targets;
  for (int i = 0; i < static_cast<int>(calls.size()); ++i) {
    const auto& r = calls[i]->req;
    if (!how.all && r.push_size() == 0 && r.pull_size() == 0) continue;
    if (part_bytes == 0) {  // the common path: one call per pserver, nothing to cut
      targets.push_back({i, std::shared_ptr<LinkCall>(std::move(calls[i])), 0});
      continue;
    }
    auto parts = r.push_size() > 0 ? RequestBuilder::SplitPush(std::move(calls[i]), part_bytes)
                                   : RequestBuilder::SplitPull(std::move(calls[i]), part_bytes);
    // Pieces of a push and the parts of the pull after them are separate groups: the pull starts
    // when every piece is done.
    const uint64_t g = parts.size() > 1 ? NewGroup() : 0;
    const uint64_t pull_group = parts.size() > 1 && parts.front()->req.is_push() ? NewGroup() : g;
    for (auto& p : parts) {
      // A push's first piece runs alone: a pserver found restarted at it has lost nothing of the
      // push, and is recovered and sent the whole push; one found restarted at a later piece
      // (which the earlier may have reached before the restart) takes the trainer from the next
      // step (PserverLink::Run).
      const bool first_piece = p->req.is_push() && p->req.piece() == 0;
      const uint64_t own = p->req.is_push() ? g : pull_group;
      targets.push_back({i, std::shared_ptr<LinkCall>(std::move(p)), first_piece ? 0 : own});
    }
  }
  auto state = std::make_shared<Handle::State>(static_cast<int>(targets.size()));
  if (how.dropped) {
    state->skipped = true;
    state->outcome = *how.dropped;
  }
  // A waiter runs the parts no link thread has picked up yet itself (the link's rule of what may
  // run together still holds); the links are held weakly, a closed client's are gone.
  std::vector<std::pair<std::weak_ptr<PserverLink>, uint64_t>> jobs;
  for (auto& [i, call, g] : targets) {
    uint64_t id = links_[i]->Submit(
        call, options_.request_timeout, how.recover,
        [this, state, on_end = call->on_end](const Status& s, const wire::DataReply& r, int64_t resume) {
          if (on_end) on_end();
          if (s.code() == StatusCode::kAborted && resume >= 0) {
            RaiseStep(resume);
            realign_ = true;
            if (job_.mode.kind == ConsistencyMode::Kind::kAsync) {
              // An async push in pieces that met a restarted pserver
              // is dropped there, whole; training goes on.
              spdlog::warn("trainer {}: {}", member_->id(), s.message());
              state->Complete(Status::OK(), r.version(), r.min_clock());
              return;
            }
          } else if (s.ok() && r.resume_step() > 0) {
            // A late push (backup trainers): dropped, the trainer goes on
            // from the pserver's open step.
            RaiseStep(r.resume_step());
          }
          if (!r.dropped().empty()) state->SetDropped(r.dropped());
          state->Complete(s, r.version(), r.min_clock());
        },
        g, /*wake=*/!(how.caller_waits && jobs.empty()));
    jobs.emplace_back(links_[i], id);
  }
  state->help = [jobs = std::move(jobs)] {
    for (const auto& [weak, id] : jobs) {
      if (auto link = weak.lock()) link->RunInline(id);
    }
  };
  return state;
}

Status ClientImpl::LeaseLost() const { return member_->LostStatus(); }

void ClientImpl::RaiseStep(int64_t to) {
  int64_t cur = step_.load();
  while (cur < to && !step_.compare_exchange_weak(cur, to)) {
  }
}

}  // namespace tessera
