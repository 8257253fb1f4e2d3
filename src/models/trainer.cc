// The generic trainer loop (see trainer.h).
#include "models/trainer.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "common/clock.h"
#include "common/strings.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "job/job_config.h"
#include "master/master_client.h"
#include "tessera/reader.h"

namespace tessera::models {
namespace {

// Sends progress to the master about once a second.
class Reporter {
 public:
  Reporter(master::MasterClient* master, std::string trainer)
      : master_(master), trainer_(std::move(trainer)) {}
  void Add(int64_t samples, double cost_sum, int64_t step, int pass) {
    samples_ += samples;
    cost_ += cost_sum;
    step_ = step;
    pass_ = pass;
    if (Now() - last_ >= std::chrono::seconds(1)) Flush({});
  }
  void Flush(const std::vector<Metric>& metrics, int metric_pass = -1) {
    master::ProgressReport r;
    r.set_trainer(trainer_);
    r.set_step(step_);
    r.set_pass(pass_);
    r.set_samples(samples_);
    r.set_cost_sum(cost_);
    r.set_seconds(std::chrono::duration<double>(Now() - last_).count());
    for (const auto& m : metrics) {
      auto* pm = r.add_metrics();
      pm->set_name(m.name);
      pm->set_value(m.value);
      pm->set_pass(metric_pass);
    }
    Status s = master_->Report(r, Deadline(std::chrono::seconds(10)));
    if (!s.ok()) spdlog::warn("progress report not delivered: {}", s.ToString());
    samples_ = 0;
    cost_ = 0;
    last_ = Now();
  }

 private:
  master::MasterClient* master_;
  std::string trainer_;
  int64_t samples_ = 0, step_ = 0;
  int pass_ = 0;
  double cost_ = 0;
  TimePoint last_ = Now();
};

// Whether `me` is the lowest live trainer id (the one that evaluates).
bool IsEvaluator(etcd::EtcdClient* etcd, const std::string& job, const std::string& me) {
  auto list = Registry(etcd, keys::TrainerPrefix(job)).List();
  if (!list.ok() || list->members.empty()) return true;
  return list->members.front().name == me;  // sorted numerically
}

}  // namespace

StatusOr<TrainerResult> RunTrainer(const TrainerOptions& o) {
  auto stopping = [&] { return o.stop && o.stop->load(); };
  TESSERA_ASSIGN_OR_RETURN(auto model, MakeModel(o.model, o.model_options));
  ClientOptions co;
  co.etcd_endpoints = o.etcd_endpoints;
  co.job = o.job;
  co.trainer_id = o.trainer_id;
  co.lease_ttl_seconds = o.lease_ttl_seconds;
  co.request_timeout = o.request_timeout;
  TESSERA_ASSIGN_OR_RETURN(auto client, Client::Connect(co));
  TESSERA_RETURN_IF_ERROR(model->Declare(*client));
  TESSERA_RETURN_IF_ERROR(client->Initialize());
  TESSERA_RETURN_IF_ERROR(client->Pull().Wait());
  const std::string me = client->trainer_id();
  const ConsistencyMode mode = client->mode();

  etcd::EtcdOptions eo;
  eo.endpoints = o.etcd_endpoints;
  TESSERA_ASSIGN_OR_RETURN(auto etcd, etcd::EtcdClient::Create(eo));
  TESSERA_ASSIGN_OR_RETURN(auto cfg, etcd->Get(keys::Config(o.job)));
  if (cfg.kvs.empty()) return Status::NotFound("job '" + o.job + "' does not exist");
  TESSERA_ASSIGN_OR_RETURN(JobConfig job, JobConfig::FromJson(cfg.kvs[0].value));
  master::MasterClient master(etcd.get(), o.job, job.token);
  Reporter reporter(&master, me);

  ReaderOptions ro;
  ro.etcd_endpoints = o.etcd_endpoints;
  ro.job = o.job;
  ro.trainer_id = me;
  ro.store = o.store;
  ro.request_timeout = o.request_timeout;
  TESSERA_ASSIGN_OR_RETURN(auto reader, Reader::Open(ro));

  std::unique_ptr<dataset::DatasetReader> eval;
  if (!o.eval_dataset.empty()) {
    if (o.store.empty()) return Status::InvalidArgument("evaluating on --eval-dataset needs --store");
    TESSERA_ASSIGN_OR_RETURN(eval, dataset::DatasetReader::Open(o.store, o.eval_dataset));
  }
  auto evaluate = [&](int pass, TrainerResult* result) -> Status {
    if (!eval || !IsEvaluator(etcd.get(), o.job, me)) return Status::OK();
    TESSERA_ASSIGN_OR_RETURN(auto metrics, model->Evaluate(*client, *eval));
    std::string line;
    for (const auto& m : metrics) line += fmt::format(" {}={:.4f}", m.name, m.value);
    spdlog::info("pass {} evaluated on {}:{}", pass + 1, o.eval_dataset, line);
    reporter.Flush(metrics, pass);
    result->final_metrics = metrics;
    return Status::OK();
  };

  TrainerResult result;
  std::vector<std::string> batch;
  std::string rec;
  int current_pass = -1;
  while (!stopping()) {
    batch.clear();
    while (static_cast<int>(batch.size()) < o.model_options.batch_size) {
      TESSERA_ASSIGN_OR_RETURN(bool more, reader->Next(&rec));
      if (!more) break;
      if (reader->pass() != current_pass) {
        // A record of a new pass: the previous pass is complete everywhere.
        if (current_pass >= 0) TESSERA_RETURN_IF_ERROR(evaluate(current_pass, &result));
        current_pass = reader->pass();
      }
      batch.push_back(rec);
    }
    if (batch.empty()) {
      TESSERA_RETURN_IF_ERROR(reader->Trained());
      if (reader->finished()) break;
      // Nothing to read right now (the rest of the pass is elsewhere): keep the steps moving.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (mode.kind != ConsistencyMode::Kind::kAsync) {
        Gradients none;
        Status s = client->PushPull(none).Wait();
        if (!s.ok() && s.code() != StatusCode::kAborted) return s;
        if (s.code() == StatusCode::kAborted) TESSERA_RETURN_IF_ERROR(client->Pull().Wait());
      }
      continue;
    }
    Gradients grads;
    TESSERA_ASSIGN_OR_RETURN(Model::StepResult r, model->Step(*client, batch, &grads));
    grads.samples = r.samples;
    Status s = client->PushPull(grads).Wait();
    if (s.code() == StatusCode::kAborted) {
      // The step closed without us (the group changed): this batch's gradient was dropped.
      spdlog::warn("step {} closed without trainer {}'s gradient: {}", client->step(), me, s.message());
      TESSERA_RETURN_IF_ERROR(client->Pull().Wait());
    } else if (!s.ok()) {
      return s;
    }
    TESSERA_RETURN_IF_ERROR(reader->Trained());
    ++result.steps;
    result.samples += r.samples;
    reporter.Add(r.samples, r.cost_sum, client->step(), std::max(0, current_pass));
  }
  if (!stopping() && current_pass >= 0) TESSERA_RETURN_IF_ERROR(evaluate(current_pass, &result));
  reporter.Flush({});
  TESSERA_RETURN_IF_ERROR(client->Close());
  return result;
}

}  // namespace tessera::models
