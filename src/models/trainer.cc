// The generic trainer loop (see trainer.h).
#include "models/trainer.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "common/busy_poll.h"
#include "common/clock.h"
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

StatusOr<TrainerResult> RunTrainer(const TrainerOptions& o) {
  auto stopping = [&] { return o.stop && o.stop->load(); };
  TESSERA_ASSIGN_OR_RETURN(auto model, MakeModel(o.model, o.model_options));
  api::SessionOptions so;
  so.connection = o.connection;
  so.trainer_id = o.trainer_id;
  so.store = o.store;
  so.lease_ttl_seconds = o.lease_ttl_seconds;
  so.transport = o.transport;
  so.request_timeout = o.request_timeout;
  TESSERA_ASSIGN_OR_RETURN(auto session, api::Session::Open(std::move(so)));
  Client* client = &session->client();
  TESSERA_RETURN_IF_ERROR(model->Declare(*client));
  TESSERA_RETURN_IF_ERROR(session->Initialize());
  const std::string me = client->trainer_id();

  // A model that cannot train on the data says so now, not as a crash at its first batch.
  TESSERA_ASSIGN_OR_RETURN(const ModelInfo* info, FindModel(o.model));
  if (!o.store.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string name, session->JobDataset());
    TESSERA_ASSIGN_OR_RETURN(auto train, dataset::FindDataset(o.store, name));
    TESSERA_RETURN_IF_ERROR(CheckModelData(*info, o.model_options, train, "the job's data set"));
  }
  std::unique_ptr<dataset::DatasetReader> eval;
  if (!o.eval_dataset.empty()) {
    if (o.store.empty()) return Status::InvalidArgument("evaluating on --eval-dataset needs --store");
    TESSERA_ASSIGN_OR_RETURN(eval, dataset::DatasetReader::Open(o.store, o.eval_dataset));
    TESSERA_RETURN_IF_ERROR(CheckModelData(*info, o.model_options, eval->manifest(), "evaluation data set"));
  }
  // When the loop's current phase began (TrainerResult::seconds).
  TimePoint mark = Now();
  auto evaluate = [&](int pass, TrainerResult* result) -> Status {
    if (!eval || !session->IsEvaluator()) return Status::OK();
    const TimePoint start = Now();
    TESSERA_ASSIGN_OR_RETURN(auto metrics, model->Evaluate(*client, *eval));
    std::string line;
    std::vector<std::pair<std::string, double>> reported;
    for (const auto& m : metrics) {
      line += fmt::format(" {}={:.4f}", m.name, m.value);
      reported.emplace_back(m.name, m.value);
    }
    spdlog::info("pass {} evaluated on {}:{}", pass + 1, o.eval_dataset, line);
    session->ReportMetrics(reported, pass);
    result->final_metrics = metrics;
    const auto took = Now() - start;
    result->seconds.evaluate += std::chrono::duration<double>(took).count();
    mark += took;  // an evaluation is not reading
    return Status::OK();
  };

  TrainerResult result;
  // Once the job is in pass p, every earlier pass is over everywhere: the evaluator evaluates the
  // one that just ended. (The job's pass comes from the master's every answer, so a pass ends
  // also for an evaluator that read none of its records.)
  int evaluated = -1;
  auto evaluate_through = [&](int job_pass) -> Status {
    if (job_pass - 1 <= evaluated) return Status::OK();
    evaluated = job_pass - 1;
    return evaluate(evaluated, &result);
  };
  // The records are read straight into the batch's strings, which keep their memory from step to
  // step (one copy of each record, none allocated once the strings have grown). Where the trainer
  // works ahead (AheadPolicy), while a step's push travels and the pserver applies it, the
  // trainer's thread reads the next batch into `ahead` (WhileWaiting, from the task at hand only:
  // Session::NextRecordInTask) and the model begins on it; the rest of a batch, if any, is read
  // as before.
  std::vector<std::string> batch, ahead;
  size_t have_ahead = 0;
  // Only where the pserver has a core to apply on while this trainer computes: the launcher's
  // judgement, which turns busy polling on (common/busy_poll.h).
  auto busy_poll = BusyPollFromEnvironment(::getenv);
  AheadPolicy ahead_policy(busy_poll.ok() && busy_poll->count() > 0);
  bool done = false;
  while (!stopping() && !done) {
    size_t n = 0;
    batch.resize(static_cast<size_t>(o.model_options.batch_size));
    if (have_ahead > 0) {
      for (; n < have_ahead; ++n) std::swap(batch[n], ahead[n]);
      have_ahead = 0;
    }
    while (n < batch.size()) {
      TESSERA_ASSIGN_OR_RETURN(api::Session::Next next, session->NextRecord(&batch[n]));
      TESSERA_RETURN_IF_ERROR(evaluate_through(session->job_pass()));
      if (next != api::Session::Next::kRecord) {
        done = next == api::Session::Next::kDone;
        break;
      }
      ++n;
    }
    batch.resize(n);
    result.seconds.read += SecondsSince(&mark);
    if (batch.empty()) {
      // Nothing to read right now (the rest of the pass is elsewhere): keep the steps moving.
      if (!done) TESSERA_RETURN_IF_ERROR(session->Idle());
      continue;
    }
    Model::StepResult r;
    Status s;
    if (model->pushes_in_pieces()) {
      // The gradients go in pieces as backward computes them; the step is done once every
      // piece is back (the batch's records are acknowledged only then).
      auto stepped = model->StepInPieces(*client, batch);
      if (!stepped.ok() && stepped.status().code() != StatusCode::kAborted) return stepped.status();
      if (stepped.ok()) r = *stepped;
      s = stepped.ok() ? model->Settle() : stepped.status();
      if (!stepped.ok()) (void)model->Settle();
    } else {
      Gradients grads;
      TESSERA_ASSIGN_OR_RETURN(r, model->Step(*client, batch, &grads));
      grads.samples = r.samples;
      result.seconds.compute += SecondsSince(&mark);
      // While the push travels, if the policy says so: the next batch read (from the task at hand
      // only), and the model's first work on it (Model::ComputeAhead) on values the pserver writes
      // in place as it makes them, kept if the call ends well without a renewal of the window.
      // The times go to read and compute, not to the exchange.
      Status read_ahead;
      double ahead_read = 0, ahead_compute = 0;
      bool made_ahead = false;
      const uint64_t renewals = WindowCountersNow().renewals;
      const bool try_ahead = ahead_policy.Try();
      WhileWaiting meanwhile(
          [&](const WaitingCall& call) {
            if (!try_ahead) return;
            TimePoint at = Now();
            ahead.resize(static_cast<size_t>(o.model_options.batch_size));
            while (have_ahead < ahead.size() && read_ahead.ok()) {
              StatusOr<bool> got = session->NextRecordInTask(&ahead[have_ahead]);
              if (!got.ok()) read_ahead = got.status();
              if (!got.ok() || !*got) break;
              ++have_ahead;
            }
            ahead_read = SecondsSince(&at);
            if (have_ahead < ahead.size() || !read_ahead.ok()) return;  // a task's end: not a try
            double waited = 0;
            made_ahead = model->ComputeAhead(ahead, [&](const void* p) {
              TimePoint w = Now();
              const bool ready = call.ReplyWrittenUpTo(p);
              waited += SecondsSince(&w);
              return ready;
            });
            ahead_compute = std::max(0.0, SecondsSince(&at) - waited);
            ahead_policy.Tried(call.progress && call.progress->load(std::memory_order_acquire) > 0);
          },
          try_ahead);
      s = client->PushPullAndWait(grads).Wait();
      TESSERA_RETURN_IF_ERROR(read_ahead);
      // Nothing between here and the next Step writes the values: the loop's one pull after a
      // call follows an aborted step, which is not kept.
      const bool kept = made_ahead && s.ok() && WindowCountersNow().renewals == renewals;
      model->KeepAhead(kept);
      result.steps_ahead += kept;
      result.seconds.read += ahead_read;
      result.seconds.compute += ahead_compute;
      mark += std::chrono::duration_cast<TimePoint::duration>(
          std::chrono::duration<double>(ahead_read + ahead_compute));
    }
    // (In pieces, backward and the exchange overlap: their time is counted as the exchange.)
    result.seconds.exchange += SecondsSince(&mark);
    if (s.code() == StatusCode::kAborted) {
      // The step closed without us (the group changed): this batch's gradient was dropped.
      spdlog::warn("step {} closed without trainer {}'s gradient: {}", client->step(), me, s.message());
      TESSERA_RETURN_IF_ERROR(client->Pull().Wait());
    } else if (!s.ok()) {
      return s;
    }
    TESSERA_RETURN_IF_ERROR(session->Trained());
    ++result.steps;
    result.samples += r.samples;
    session->Report(r.samples, r.cost_sum);
    result.seconds.acknowledge += SecondsSince(&mark);
  }
  TESSERA_RETURN_IF_ERROR(session->Close());
  return result;
}

}  // namespace tessera::models
