// The generic trainer loop (see trainer.h).
#include "models/trainer.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <optional>

#include "common/busy_poll.h"
#include "common/clock.h"
#include "common/flag_names.h"
#include "common/while_waiting.h"
#include "models/ahead_policy.h"
#include "tessera/session.h"
#include "transport/shm_window.h"

namespace tessera::models {
namespace {
double SecondsSince(TimePoint* mark) {
  const TimePoint now = Now();
  const double s = std::chrono::duration<double>(now - *mark).count();
  *mark = now;
  return s;
}
}  // namespace

std::string PhasesSummary(const TrainerResult::Phases& p) {
  std::string s = fmt::format("read {:.3f} s, compute {:.3f} s, exchange {:.3f} s, acknowledge {:.3f} s",
                              p.read, p.compute, p.exchange, p.acknowledge);
  if (p.evaluate > 0) s += fmt::format(", evaluate {:.3f} s", p.evaluate);
  return s;
}

std::optional<TrainerResult::Phases> PhasesFromLine(const std::string& line) {
  const size_t at = line.find("time: read ");
  if (at == std::string::npos) return std::nullopt;
  TrainerResult::Phases p;
  int used = 0;
  if (std::sscanf(line.c_str() + at, "time: read %lf s, compute %lf s, exchange %lf s, acknowledge %lf s%n",
                  &p.read, &p.compute, &p.exchange, &p.acknowledge, &used) != 4)
    return std::nullopt;
  (void)std::sscanf(line.c_str() + at + used, ", evaluate %lf s", &p.evaluate);
  return p;
}

namespace {

// One trainer's run, as phases: Open (the model, the session, its parameters declared and
// initialized), CheckData, then Train: batches read (ReadBatch), stepped (in pieces, or whole
// with the next batch begun while the push travels: PushAndWorkAhead), acknowledged
// (Acknowledge), and the passes evaluated as the job moves on (EvaluateThrough).
class TrainerRun {
 public:
  explicit TrainerRun(const TrainerOptions& o) : o_(o) {}

  Status Open();
  Status CheckData();
  StatusOr<TrainerResult> Train();

 private:
  // What was done while a push travelled (PushAndWorkAhead).
  struct Ahead {
    Status read;  // reading the next batch
    double read_seconds = 0, compute_seconds = 0;
    bool made = false;  // the model began on it
  };

  bool stopping() const { return o_.stop && o_.stop->load(); }
  Status Evaluate(int pass);
  Status EvaluateThrough(int job_pass);
  // Fills batch_ (the records read ahead first); sets done_ at the job's end.
  Status ReadBatch();
  // The step's status (Aborted: the step closed without this trainer) in *s; an error to end on.
  Status StepInPieces(Model::StepResult* r, Status* s);
  Status StepAndPush(Model::StepResult* r, Status* s);
  Status PushAndWorkAhead(const Gradients& grads, Status* s);
  void WorkAhead(const WaitingCall& call, Ahead* ahead);
  Status Acknowledge(const Model::StepResult& r, const Status& s);

  const TrainerOptions& o_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<api::Session> session_;
  Client* client_ = nullptr;
  std::string me_;
  const ModelInfo* info_ = nullptr;
  std::unique_ptr<dataset::DatasetReader> eval_;
  TrainerResult result_;
  TimePoint mark_;      // when the loop's current phase began (TrainerResult::seconds)
  int evaluated_ = -1;  // the last pass evaluated
  bool done_ = false;
  // The records are read straight into the batch's strings, which keep their memory from step
  // to step (one copy of each record, none allocated once the strings have grown). Where the
  // trainer works ahead (AheadPolicy), while a step's push travels and the pserver applies it,
  // the trainer's thread reads the next batch into `ahead_` (WhileWaiting, from the task at hand
  // only: Session::NextRecordInTask) and the model begins on it; the rest of a batch, if any, is
  // read as before.
  std::vector<std::string> batch_, ahead_;
  size_t have_ahead_ = 0;
  std::optional<AheadPolicy> ahead_policy_;
};

Status TrainerRun::Open() {
  TESSERA_ASSIGN_OR_RETURN(model_, MakeModel(o_.model, o_.model_options));
  api::SessionOptions so;
  so.connection = o_.connection;
  so.trainer_id = o_.trainer_id;
  so.store = o_.store;
  so.lease_ttl_seconds = o_.lease_ttl_seconds;
  so.transport = o_.transport;
  so.request_timeout = o_.request_timeout;
  TESSERA_ASSIGN_OR_RETURN(session_, api::Session::Open(std::move(so)));
  client_ = &session_->client();
  TESSERA_RETURN_IF_ERROR(model_->Declare(*client_));
  TESSERA_RETURN_IF_ERROR(session_->Initialize());
  me_ = client_->trainer_id();
  // Only where the pserver has a core to apply on while this trainer computes: the launcher's
  // judgement, which turns busy polling on (common/busy_poll.h); TESSERA_WORK_AHEAD=1 or 0 says
  // so by hand (a bench comparing both).
  auto busy_poll = BusyPollFromEnvironment(::getenv);
  bool ahead = busy_poll.ok() && busy_poll->count() > 0;
  if (const char* w = ::getenv(flags::kEnvWorkAhead); w != nullptr && *w != '\0') {
    const std::string v = w;
    if (v == "1" || v == "0") {
      ahead = v == "1";
    } else {
      spdlog::warn("{}={} is neither 1 nor 0: ignored (the work ahead stays {})", flags::kEnvWorkAhead, v,
                   ahead ? "on" : "off");
    }
  }
  ahead_policy_.emplace(ahead);
  return Status::OK();
}

// A model that cannot train on the data says so now, not as a crash at its first batch.
Status TrainerRun::CheckData() {
  TESSERA_ASSIGN_OR_RETURN(info_, FindModel(o_.model));
  if (!o_.store.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string name, session_->JobDataset());
    TESSERA_ASSIGN_OR_RETURN(auto train, dataset::FindDataset(o_.store, name));
    TESSERA_RETURN_IF_ERROR(CheckModelData(*info_, o_.model_options, train, "the job's data set"));
  }
  if (!o_.eval_dataset.empty()) {
    if (o_.store.empty()) return Status::InvalidArgument("evaluating on --eval-dataset needs --store");
    TESSERA_ASSIGN_OR_RETURN(eval_, dataset::DatasetReader::Open(o_.store, o_.eval_dataset));
    TESSERA_RETURN_IF_ERROR(
        CheckModelData(*info_, o_.model_options, eval_->manifest(), "evaluation data set"));
  }
  return Status::OK();
}

Status TrainerRun::Evaluate(int pass) {
  if (!eval_ || !session_->IsEvaluator()) return Status::OK();
  const TimePoint start = Now();
  TESSERA_ASSIGN_OR_RETURN(auto metrics, model_->Evaluate(*client_, *eval_));
  std::string line;
  std::vector<std::pair<std::string, double>> reported;
  for (const auto& m : metrics) {
    line += fmt::format(" {}={:.4f}", m.name, m.value);
    reported.emplace_back(m.name, m.value);
  }
  spdlog::info("pass {} evaluated on {}:{}", pass + 1, o_.eval_dataset, line);
  session_->ReportMetrics(reported, pass);
  result_.final_metrics = metrics;
  const auto took = Now() - start;
  result_.seconds.evaluate += std::chrono::duration<double>(took).count();
  mark_ += took;  // an evaluation is not reading
  return Status::OK();
}

// Once the job is in pass p, every earlier pass is over everywhere: the evaluator evaluates the
// one that just ended. (The job's pass comes from the master's every answer, so a pass ends also
// for an evaluator that read none of its records.)
Status TrainerRun::EvaluateThrough(int job_pass) {
  if (job_pass - 1 <= evaluated_) return Status::OK();
  evaluated_ = job_pass - 1;
  return Evaluate(evaluated_);
}

Status TrainerRun::ReadBatch() {
  size_t n = 0;
  batch_.resize(static_cast<size_t>(o_.model_options.batch_size));
  if (have_ahead_ > 0) {
    for (; n < have_ahead_; ++n) std::swap(batch_[n], ahead_[n]);
    have_ahead_ = 0;
  }
  while (n < batch_.size()) {
    TESSERA_ASSIGN_OR_RETURN(api::Session::Next next, session_->NextRecord(&batch_[n]));
    TESSERA_RETURN_IF_ERROR(EvaluateThrough(session_->job_pass()));
    if (next != api::Session::Next::kRecord) {
      done_ = next == api::Session::Next::kDone;
      break;
    }
    ++n;
  }
  batch_.resize(n);
  return Status::OK();
}

// The gradients go in pieces as backward computes them; the step is done once every piece is
// back (the batch's records are acknowledged only then).
Status TrainerRun::StepInPieces(Model::StepResult* r, Status* s) {
  auto stepped = model_->StepInPieces(*client_, batch_);
  if (!stepped.ok() && stepped.status().code() != StatusCode::kAborted) return stepped.status();
  if (stepped.ok()) *r = *stepped;
  *s = stepped.ok() ? model_->Settle() : stepped.status();
  if (!stepped.ok()) (void)model_->Settle();
  return Status::OK();
}

Status TrainerRun::StepAndPush(Model::StepResult* r, Status* s) {
  Gradients grads;
  TESSERA_ASSIGN_OR_RETURN(*r, model_->Step(*client_, batch_, &grads));
  grads.samples = r->samples;
  result_.seconds.compute += SecondsSince(&mark_);
  return PushAndWorkAhead(grads, s);
}

// While the push travels, if the policy says so: the next batch read (from the task at hand
// only), and the model's first work on it (Model::ComputeAhead) on values the pserver writes in
// place as it makes them, kept if the call ends well without a renewal of the window. The times
// go to read and compute, not to the exchange.
Status TrainerRun::PushAndWorkAhead(const Gradients& grads, Status* s) {
  Ahead ahead;
  const uint64_t renewals = WindowCountersNow().renewals;
  const bool try_ahead = ahead_policy_->Try();
  WhileWaiting meanwhile(
      [&](const WaitingCall& call) {
        if (try_ahead) WorkAhead(call, &ahead);
      },
      try_ahead);
  *s = client_->PushPullAndWait(grads).Wait();
  TESSERA_RETURN_IF_ERROR(ahead.read);
  // Nothing between here and the next Step writes the values: the loop's one pull after a call
  // follows an aborted step, which is not kept.
  const bool kept = ahead.made && s->ok() && WindowCountersNow().renewals == renewals;
  model_->KeepAhead(kept);
  result_.steps_ahead += kept;
  result_.seconds.read += ahead.read_seconds;
  result_.seconds.compute += ahead.compute_seconds;
  mark_ += std::chrono::duration_cast<TimePoint::duration>(
      std::chrono::duration<double>(ahead.read_seconds + ahead.compute_seconds));
  return Status::OK();
}

void TrainerRun::WorkAhead(const WaitingCall& call, Ahead* a) {
  TimePoint at = Now();
  ahead_.resize(static_cast<size_t>(o_.model_options.batch_size));
  while (have_ahead_ < ahead_.size() && a->read.ok()) {
    StatusOr<bool> got = session_->NextRecordInTask(&ahead_[have_ahead_]);
    if (!got.ok()) a->read = got.status();
    if (!got.ok() || !*got) break;
    ++have_ahead_;
  }
  a->read_seconds = SecondsSince(&at);
  if (have_ahead_ < ahead_.size() || !a->read.ok()) return;  // a task's end: not a try
  double waited = 0;
  a->made = model_->ComputeAhead(ahead_, [&](const void* p) {
    TimePoint w = Now();
    const bool ready = call.ReplyWrittenUpTo(p);
    waited += SecondsSince(&w);
    return ready;
  });
  a->compute_seconds = std::max(0.0, SecondsSince(&at) - waited);
  ahead_policy_->Tried(call.progress && call.progress->load(std::memory_order_acquire) > 0);
}

Status TrainerRun::Acknowledge(const Model::StepResult& r, const Status& s) {
  if (s.code() == StatusCode::kAborted) {
    // The step closed without us (the group changed): this batch's gradient was dropped.
    spdlog::warn("step {} closed without trainer {}'s gradient: {}", client_->step(), me_, s.message());
    TESSERA_RETURN_IF_ERROR(client_->Pull().Wait());
  } else if (!s.ok()) {
    return s;
  }
  TESSERA_RETURN_IF_ERROR(session_->Trained());
  ++result_.steps;
  result_.samples += r.samples;
  session_->Report(r.samples, r.cost_sum);
  result_.seconds.acknowledge += SecondsSince(&mark_);
  return Status::OK();
}

StatusOr<TrainerResult> TrainerRun::Train() {
  mark_ = Now();
  while (!stopping() && !done_) {
    TESSERA_RETURN_IF_ERROR(ReadBatch());
    result_.seconds.read += SecondsSince(&mark_);
    if (batch_.empty()) {
      // Nothing to read right now (the rest of the pass is elsewhere): keep the steps moving.
      if (!done_) TESSERA_RETURN_IF_ERROR(session_->Idle());
      continue;
    }
    Model::StepResult r;
    Status s;
    TESSERA_RETURN_IF_ERROR(model_->pushes_in_pieces() ? StepInPieces(&r, &s) : StepAndPush(&r, &s));
    // (In pieces, backward and the exchange overlap: their time is counted as the exchange.)
    result_.seconds.exchange += SecondsSince(&mark_);
    TESSERA_RETURN_IF_ERROR(Acknowledge(r, s));
  }
  TESSERA_RETURN_IF_ERROR(session_->Close());
  return std::move(result_);
}

}  // namespace

StatusOr<TrainerResult> RunTrainer(const TrainerOptions& o) {
  TrainerRun run(o);
  TESSERA_RETURN_IF_ERROR(run.Open());
  TESSERA_RETURN_IF_ERROR(run.CheckData());
  return run.Train();
}

}  // namespace tessera::models
