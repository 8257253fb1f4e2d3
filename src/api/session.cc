// Session (see session.h).
#include "tessera/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "api/health_server.h"
#include "api/trainer_position.h"
#include "client/exporter.h"
#include "client/job_connection.h"
#include "client/master_client.h"
#include "client/progress_reporter.h"
#include "client/reader_on.h"
#include "common/busy_poll.h"
#include "common/deadlock_checks.h"
#include "common/flag_names.h"
#include "common/logging.h"
#include "common/strings.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "job/job_config.h"
#include "job/job_store.h"

namespace tessera::api {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Status SessionOptions::ResolveFromEnvironment() {
  TESSERA_RETURN_IF_ERROR(connection.FillFromEnvironment());
  if (trainer_id.empty()) trainer_id = Env(flags::kEnvTrainerId);
  if (store.empty()) store = Env(flags::kEnvStore);
  if (transport.empty()) transport = Env(flags::kEnvTransport);
  if (transport.empty()) transport = "auto";
  if (pipeline < 0) {
    const std::string p = Env(flags::kEnvPipeline);
    if (!p.empty() && p != "0" && p != "1")
      return Status::InvalidArgument("TESSERA_PIPELINE='" + p + "' is not 0 or 1");
    pipeline = p == "0" ? 0 : 1;
  }
  if (busy_poll_us < 0) {
    TESSERA_ASSIGN_OR_RETURN(auto spin, BusyPollFromEnvironment(::getenv));
    busy_poll_us = static_cast<int>(spin.count());
  }
  if (http_port < 0) {
    std::string port = Env(flags::kEnvHttpPort);
    http_port = port.empty() ? -1 : std::atoi(port.c_str());
    if (!port.empty() &&
        (http_port < 0 || http_port > 65535 || port.find_first_not_of("0123456789") != std::string::npos))
      return Status::InvalidArgument("TESSERA_HTTP_PORT='" + port + "' is not a port number");
  }
  if (http_host.empty()) http_host = Env("TESSERA_ADVERTISE");
  if (http_host.empty()) http_host = Env("POD_IP");
  if (http_host.empty()) http_host = "127.0.0.1";
  if (lease_ttl_seconds <= 0) {
    std::string ttl = Env(flags::kEnvLeaseTtl);
    lease_ttl_seconds = ttl.empty() ? 10 : std::atoll(ttl.c_str());
    if (lease_ttl_seconds <= 0) {
      return Status::InvalidArgument("TESSERA_LEASE_TTL='" + ttl + "' is not a positive number of seconds");
    }
  }
  return connection.Validate();
}

// ---- Session ----

struct Session::Impl {
  std::unique_ptr<Client> client;
  std::unique_ptr<etcd::EtcdClient> etcd;
  TrainerConnection job;  // on `etcd`: the reader's too (client/reader_on.h)
  std::unique_ptr<master::MasterClient> master;
  std::unique_ptr<master::ProgressReporter> reporter;
  std::unique_ptr<Reader> reader;
  bool initialized = false;
  bool closed = false;
  int pass = 0;
  int64_t read_in_task = 0;  // records NextRecordInTask returned since the last Trained()
  // Consistent checkpoints: report the data position at every multiple of this step (0: off).
  TrainerPosition positions{0};          // which steps to report, and the position there
  std::unique_ptr<HealthServer> health;  // when asked for (SessionOptions::http_port)
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { client_ = impl_->client.get(); }

Session::~Session() { (void)Close(); }

StatusOr<std::unique_ptr<Session>> Session::Open(SessionOptions o) {
  TurnOffDeadlockChecks();  // a trainer from Python or C is a process of its own (deadlock_checks.h)
  TESSERA_RETURN_IF_ERROR(o.ResolveFromEnvironment());
  auto impl = std::make_unique<Impl>();
  if (o.http_port >= 0) {
    TESSERA_ASSIGN_OR_RETURN(impl->health, HealthServer::Start(o.http_host, o.http_port));
    spdlog::info("/healthz and /readyz at http://{}:{}", o.http_host, impl->health->port());
  }
  TESSERA_ASSIGN_OR_RETURN(JobConnection job, ConnectJob(o.connection, o.connect_timeout));
  impl->etcd = std::move(job.etcd);
  impl->job = {impl->etcd.get(), job.config, job.secret, job.tls};
  ClientOptions co;
  co.connection = o.connection;
  co.trainer_id = o.trainer_id;
  co.lease_ttl_seconds = o.lease_ttl_seconds;
  co.request_timeout = o.request_timeout;
  co.connect_timeout = o.connect_timeout;
  co.transport = o.transport;
  co.pipeline = o.pipeline != 0;
  co.busy_poll = std::chrono::microseconds(o.busy_poll_us);
  TESSERA_ASSIGN_OR_RETURN(impl->client, Client::Connect(co));
  impl->master = std::make_unique<master::MasterClient>(impl->etcd.get(), o.connection.job, job.config.token,
                                                        job.secret, job.tls);
  impl->reporter = std::make_unique<master::ProgressReporter>(impl->master.get(), impl->client->trainer_id());
  impl->positions = TrainerPosition(job.config.checkpoint_steps);
  o.trainer_id = impl->client->trainer_id();
  std::unique_ptr<Session> s(new Session(std::move(impl)));
  s->options_ = std::move(o);
  return s;
}

Status Session::Initialize() {
  if (impl_->initialized) return Status::OK();
  TESSERA_RETURN_IF_ERROR(client_->Initialize());
  TESSERA_RETURN_IF_ERROR(client_->Pull().Wait());
  impl_->initialized = true;
  if (impl_->health) impl_->health->SetReady(true);
  impl_->positions.Joined(client_->step() + 1);
  return Status::OK();
}

Status Session::AfterStep() {
  const int64_t step = client_->step();
  if (!impl_->reader || !impl_->positions.Due(step)) return Status::OK();
  master::PositionReport report;
  report.set_trainer(client_->trainer_id());
  report.set_version(step);
  report.set_first_step(impl_->positions.first_step());
  for (const auto& t : impl_->positions.PositionAt(step, impl_->reader->Held())) {
    auto* h = report.add_tasks();
    h->set_id(t.task);
    h->set_epoch(t.epoch);
    h->set_pass(t.pass);
    h->set_offset(t.offset);
    h->set_records(t.records);
  }
  // Not fatal: without this report that version is not a consistent checkpoint, a later one is.
  Status s = impl_->master->ReportPosition(report, Deadline(std::chrono::seconds(10)));
  if (!s.ok()) spdlog::warn("could not report the data position at step {}: {}", step, s.ToString());
  return Status::OK();
}

StatusOr<std::string> Session::JobDataset() {
  TESSERA_ASSIGN_OR_RETURN(auto st, impl_->master->GetStatus(Deadline(options_.request_timeout)));
  return st.dataset();
}

Status Session::OpenReader() {
  if (impl_->reader) return Status::OK();
  ReaderOptions ro;
  ro.connection = options_.connection;
  ro.trainer_id = client_->trainer_id();
  ro.store = options_.store;
  ro.request_timeout = options_.request_timeout;
  ro.lease_ttl_seconds = options_.lease_ttl_seconds;
  TESSERA_ASSIGN_OR_RETURN(impl_->reader, OpenReaderOn(ro, impl_->job));
  return Status::OK();
}

StatusOr<Session::Next> Session::NextRecord(std::string* record) {
  if (!impl_->initialized)
    return Status::FailedPrecondition("initialize the parameters before reading records");
  TESSERA_RETURN_IF_ERROR(OpenReader());
  TESSERA_ASSIGN_OR_RETURN(bool more, impl_->reader->Next(record));
  if (more) {
    impl_->pass = impl_->reader->pass();
    impl_->positions.RecordReturned(client_->step());
    return Next::kRecord;
  }
  return impl_->reader->finished() ? Next::kDone : Next::kWait;
}

StatusOr<bool> Session::NextRecordInTask(std::string* record) {
  if (!impl_->initialized)
    return Status::FailedPrecondition("initialize the parameters before reading records");
  if (!impl_->reader) return false;
  TESSERA_ASSIGN_OR_RETURN(bool got, impl_->reader->NextInTask(record));
  if (got) ++impl_->read_in_task;
  return got;
}

Status Session::Idle() {
  TESSERA_RETURN_IF_ERROR(Trained());
  impl_->reporter->FlushPending();
  // A sync empty step waits for the others' steps: while they train, a pause here would hold
  // every one of their steps for its length (a 2-trainer mlp job's pass tail ran at 10 ms a
  // step). Only async trainers, or sync ones nobody is training beside, pause.
  const bool paced = client_->mode().kind != ConsistencyMode::Kind::kAsync && impl_->reader &&
                     impl_->reader->others_training();
  if (!paced) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return EmptyStep();
}

Status Session::Trained() {
  if (!impl_->reader) return Status::OK();
  // Records read while the step was on its way are not in the model at this step's version.
  if (impl_->read_in_task > 0) impl_->positions.RecordReturned(client_->step(), impl_->read_in_task);
  impl_->read_in_task = 0;
  // The step tells the master which version holds the acknowledged tasks (consistent checkpoints).
  TESSERA_RETURN_IF_ERROR(impl_->reader->TrainedAt(impl_->positions.enabled() ? client_->step() : -1));
  return AfterStep();
}
int Session::pass() const { return impl_->pass; }
int Session::job_pass() const { return impl_->reader ? impl_->reader->job_pass() : -1; }
int Session::passes() const { return impl_->reader ? impl_->reader->passes() : 0; }
bool Session::finished() const { return impl_->reader && impl_->reader->finished(); }
std::string Session::record_type() const { return impl_->reader ? impl_->reader->record_type() : ""; }

Status Session::EmptyStep() {
  if (client_->mode().kind == ConsistencyMode::Kind::kAsync) return Status::OK();
  Gradients none;
  Status s = client_->PushPullAndWait(none).Wait();
  // Aborted: the step closed without us (the group changed); catch up with a pull.
  if (s.code() == StatusCode::kAborted) return client_->Pull().Wait();
  TESSERA_RETURN_IF_ERROR(s);
  return AfterStep();
}

void Session::Report(int64_t samples, double cost_sum) {
  impl_->reporter->Add(samples, cost_sum, client_->step(), impl_->pass);
}

void Session::ReportMetrics(const std::vector<std::pair<std::string, double>>& metrics, int pass) {
  impl_->reporter->Flush(metrics, pass);
}

bool Session::IsEvaluator() {
  return master::IsLowestLiveTrainer(impl_->etcd.get(), options_.connection.job, client_->trainer_id());
}

Status Session::Close() {
  if (impl_->closed) return Status::OK();
  impl_->closed = true;
  Status s = Status::OK();
  if (impl_->reader) s = impl_->reader->Trained();
  impl_->reporter->Flush();
  Status c = client_->Close();
  return s.ok() ? c : s;
}

// ---- Tools beside a session ----

Status ExportModelFile(const SessionOptions& options, const std::string& path,
                       std::chrono::milliseconds timeout) {
  SessionOptions o = options;
  TESSERA_RETURN_IF_ERROR(o.ResolveFromEnvironment());
  TESSERA_ASSIGN_OR_RETURN(JobConnection job, ConnectJob(o.connection, o.connect_timeout));
  TESSERA_ASSIGN_OR_RETURN(models::ModelFile model,
                           ExportModel(job.etcd.get(), o.connection.job, job.secret, timeout, job.tls));
  return models::WriteModelFile(path, model);
}

Status InitLogging(const std::string& job, const std::string& node, const std::string& level) {
  LogOptions lo;
  lo.job = job;
  lo.node = node;
  lo.level = level;
  return tessera::InitLogging(lo);
}

}  // namespace tessera::api
