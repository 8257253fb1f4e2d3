// How a trainer joins a job (see client_impl.h), once registered (trainer_membership.h): it makes
// the pservers ready (one trainer under the init
// lock for a fresh job; live trainers restore a replaced pserver), and agrees with every pserver
// on the step it starts at. What to do at each turn is decided by client_rules.h.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <latch>
#include <string>
#include <vector>

#include "client/client_impl.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/strings.h"
#include "coord/election.h"
#include "coord/keys.h"

namespace tessera {

// ---- Registration -----------------------------------------------------------------------------

// "shm" when every pserver is reached over shared memory, else "0:shm,1:tcp".
std::string ClientImpl::TransportsText() const {
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
void ClientImpl::RecordTransports() {
  nlohmann::json used = nlohmann::json::object();
  for (const auto& l : links_) used[std::to_string(l->index())] = l->transport_name();
  member_->RecordTransports(used);
}

// ---- Initialization ---------------------------------------------------------------------------

// A wire format the job gives a parameter by name must name one: a misspelt name would leave
// that parameter in the format of the rest, unseen.
Status ClientImpl::CheckWireNames() const {
  if (job_.wire.params.empty()) return Status::OK();
  std::vector<std::string> declared;
  for (const auto& d : builder_->dense()) declared.push_back(d.name);
  for (const auto& t : builder_->sparse()) declared.push_back(t.name);
  for (const auto& [name, format] : job_.wire.params) {
    if (std::find(declared.begin(), declared.end(), name) != declared.end()) continue;
    return Status::InvalidArgument("the job's wire gives '" + name + "' the format " + format.ToString() +
                                   ", but this trainer declared no parameter of that name (it declared: " +
                                   (declared.empty() ? "none" : Join(declared, ", ")) + ")");
  }
  return Status::OK();
}

Status ClientImpl::Initialize() {
  TESSERA_RETURN_IF_ERROR(CheckWireNames());
  Deadline d(options_.request_timeout);
  Status joined = Status::OK();
  // A pserver may be replaced while this runs (seen ready, then gone): start over, a few times.
  for (int round = 0; round < limits_.init_rounds && !d.expired(); ++round) {
    TESSERA_RETURN_IF_ERROR(directory_->WaitAllRegistered(d));
    TESSERA_RETURN_IF_ERROR(InitializePservers(d));
    TESSERA_RETURN_IF_ERROR(directory_->WaitAllReady(d));
    joined = JoinAll(d);
    if (joined.ok() || directory_->AllReady()) break;
  }
  TESSERA_RETURN_IF_ERROR(joined);
  initialized_ = true;
  RecordTransports();
  spdlog::info("trainer {} joined {} pservers at step {} (mode {}, transport {})", member_->id(),
               links_.size(), step_.load(), job_.mode.ToString(), TransportsText());
  return Status::OK();
}

bool ClientImpl::AnyReady() const {
  for (int i = 0; i < job_.pservers; ++i) {
    if (directory_->Ready(i)) return true;
  }
  return false;
}

// Makes every pserver ready (PlanInit): a fresh job's pservers get this trainer's initial values
// (one trainer does it, under the init lock); a pserver replaced mid-job is restored by the
// trainers that were training (they hold current values), and only if none does in a grace
// period does this trainer restore it itself.
Status ClientImpl::InitializePservers(const Deadline& d) {
  switch (PlanInit(directory_->AllReady(), AnyReady())) {
    case InitPlan::kNothing:
      return Status::OK();
    case InitPlan::kAwaitRestorers: {
      Deadline g(std::min<std::chrono::milliseconds>(limits_.RestoreGrace(options_.lease_ttl_seconds),
                                                     d.remaining()));
      if (directory_->WaitAllReady(g).ok()) return Status::OK();
      break;
    }
    case InitPlan::kTakeLock:
      break;
  }
  Election lock(etcd_.get(), keys::InitLockPrefix(options_.connection.job), member_->lease());
  Status won = lock.Campaign(member_->id(), [&] { return directory_->AllReady() || d.expired(); });
  if (won.code() == StatusCode::kCancelled) return Status::OK();  // another trainer did it
  TESSERA_RETURN_IF_ERROR(won);
  Status s = InitializeUnready(d);
  (void)lock.Resign();
  return s;
}

// Initializes every pserver that is not ready. REQUIRES: holding the init lock.
Status ClientImpl::InitializeUnready(const Deadline& d) {
  // The directory follows etcd through a watch: give it a moment to catch up first.
  const bool all_ready = directory_->WaitAllReady(Deadline(std::chrono::seconds(1))).ok();
  int ready = -1;
  for (int i = 0; i < job_.pservers && ready < 0; ++i) {
    if (directory_->Ready(i)) ready = i;
  }
  int64_t version = step_.load();
  switch (PlanInitUnderLock(all_ready, ready >= 0)) {
    case InitWork::kNothing:
      return Status::OK();
    case InitWork::kRestoreFromOthers:
      TESSERA_RETURN_IF_ERROR(RestoreFromOthers(d, ready, &version));
      break;
    case InitWork::kFreshInit:
      break;
  }
  return OnEveryLink([&](PserverLink& link) -> Status {
    if (directory_->Ready(link.index())) return Status::OK();
    if (ready >= 0) {
      spdlog::warn(
          "{}pserver {} lost its parameters and no trainer had a copy: re-initializing it at version {} "
          "(current values from the other pservers, initial values for its own; enable checkpoints "
          "to avoid this)",
          kNoticeMark, link.index(), version);
    }
    return recovery_->InitPserver(link, d, version);
  });
}

// A pserver lost its parameters and no trainer restored them: start it at the others' version
// (so steps line up) with the current values of everything the others hold and this trainer's
// initial values for the rest. Checkpoints avoid this loss.
Status ClientImpl::RestoreFromOthers(const Deadline& d, int ready, int64_t* version) {
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
  *version = r->version();
  step_ = *version;
  auto calls = NewCalls();
  builder_->AddDensePull(&calls);
  for (int i = 0; i < job_.pservers; ++i) {
    if (!directory_->Ready(i)) calls[i] = std::make_unique<LinkCall>();  // nothing to pull there
    calls[i]->req.set_need(PullNeed(*version));
  }
  return Handle(Dispatch(std::move(calls), {.recover = false})).Wait();
}

// ---- The join ---------------------------------------------------------------------------------

// Every pserver must agree on the step this trainer starts at (StartStepAgreement).
Status ClientImpl::JoinAll(const Deadline& d) {
  StartStepAgreement agreement(step_.load(), limits_.join_rounds);
  while (true) {
    std::vector<int64_t> starts(links_.size(), -1);
    TESSERA_RETURN_IF_ERROR(OnEveryLink([&](PserverLink& link) -> Status {
      LinkCall call;
      call.req.set_op(wire::DataRequest::JOIN);
      call.req.set_step(agreement.requested());
      // A pserver that restarted without its parameters (a replacement still waiting for them)
      // is refilled from this trainer's values at its step, as a push would, then joined.
      TESSERA_ASSIGN_OR_RETURN(wire::DataReply r, link.Run(call, d, /*recover=*/true));
      starts[link.index()] = r.start_step();
      return Status::OK();
    }));
    switch (agreement.Answer(starts)) {
      case StartStepAgreement::Outcome::kAgreed:
        step_ = agreement.agreed();
        return Status::OK();
      case StartStepAgreement::Outcome::kGiveUp:
        return agreement.GiveUpStatus();
      case StartStepAgreement::Outcome::kAskAgain:
        break;
    }
  }
}

Status ClientImpl::Realign() {
  if (!initialized_ || !realign_.exchange(false)) return Status::OK();
  return JoinAll(Deadline(options_.request_timeout));
}

}  // namespace tessera
