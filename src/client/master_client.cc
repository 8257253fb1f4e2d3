// MasterClient (see master_client.h).
#include "client/master_client.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "common/backoff.h"
#include "common/clock.h"
#include "coord/connection_sharing.h"
#include "coord/election.h"
#include "coord/keys.h"
#include "security/grpc_tls.h"

namespace tessera::master {

MasterClient::MasterClient(etcd::EtcdClient* etcd, std::string job, std::string job_token,
                           const security::JobSecret& secret, std::shared_ptr<const security::TlsConfig> tls)
    : etcd_(etcd), job_(std::move(job)), token_(std::move(job_token)), tls_(std::move(tls)) {
  if (!secret.empty()) auth_.emplace(secret);
}

MasterClient::~MasterClient() {
  if (watch_) watch_->Cancel();
}

void MasterClient::OnCandidates(const MemberList& list) {
  auto leader = Election::LeaderOf(list);
  std::lock_guard<std::mutex> lock(ctx_mu_);
  leader_key_ = leader ? leader->key : "";
  watched_ = true;
  if (active_ && leader_key_ != called_key_) active_->TryCancel();
}

std::string MasterClient::leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return address_;
}

Status MasterClient::Resolve(const Deadline& deadline) {
  (void)deadline;  // the etcd client retries within its own timeout
  TESSERA_ASSIGN_OR_RETURN(auto leader, Election::Leader(etcd_, keys::MasterElectionPrefix(job_)));
  if (!leader.has_value()) return Status::Unavailable("job '" + job_ + "' has no master (is one running?)");
  auto j = nlohmann::json::parse(leader->value, nullptr, false);
  if (j.is_discarded() || !j.contains("address"))
    return Status::DataLoss("master registration is not readable");
  std::string address = j["address"].get<std::string>();
  {
    std::lock_guard<std::mutex> lock(ctx_mu_);
    called_key_ = leader->key;
  }
  if (address != address_ || !stub_) {
    if (!address_.empty() && address != address_)
      spdlog::info("master of job {} is now at {}", job_, address);
    address_ = address;
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    ApplyConnectionGroup(&args, connection_group_);  // its own connection, or its group's
    security::AddGrpcTlsArgs(&args, tls_.get());
    channel_ = grpc::CreateCustomChannel(address_, security::GrpcChannelCredentials(tls_.get()), args);
    stub_ = Master::NewStub(channel_);
  }
  return Status::OK();
}

template <typename Fn>
Status MasterClient::Call(const char* what, const char* method, const google::protobuf::Message& request,
                          const Deadline& deadline, Fn fn) {
  const std::string body = auth_ ? request.SerializeAsString() : "";
  std::lock_guard<std::mutex> lock(mu_);
  if (!watch_) {
    watch_ = Registry(etcd_, keys::MasterElectionPrefix(job_)).Watch([this](const MemberList& l) {
      OnCandidates(l);
    });
  }
  Backoff backoff({std::chrono::milliseconds(50), std::chrono::milliseconds(1000), 2.0, 0.2});
  Status last = Status::Unavailable("no master reached");
  while (!deadline.expired()) {
    Status r = stub_ ? Status::OK() : Resolve(deadline);
    if (r.ok()) {
      auto connect_by =
          std::chrono::system_clock::now() + std::min(deadline.remaining(), std::chrono::milliseconds(1000));
      if (channel_->GetState(true) == GRPC_CHANNEL_READY || channel_->WaitForConnected(connect_by)) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() +
                         std::min(deadline.remaining(), std::chrono::milliseconds(30000)));
        if (auth_) ctx.AddMetadata(security::kRpcAuthMetadata, auth_->Token(method, body, WallMillis()));
        bool superseded;
        {
          std::lock_guard<std::mutex> l(ctx_mu_);
          superseded = watched_ && leader_key_ != called_key_;
          if (!superseded) active_ = &ctx;
        }
        grpc::Status s = superseded ? grpc::Status(grpc::StatusCode::CANCELLED, "") : fn(*stub_, &ctx);
        {
          std::lock_guard<std::mutex> l(ctx_mu_);
          active_ = nullptr;
          superseded = superseded || (watched_ && leader_key_ != called_key_);
        }
        if (s.ok()) return Status::OK();
        if (superseded) {
          // The master we called is no longer the leader (its key is gone): look for the new one.
          last = Status::Unavailable("master " + address_ + ": " + what + ": it is no longer the leader");
        } else {
          last = Status(static_cast<StatusCode>(s.error_code()),
                        "master " + address_ + ": " + what + ": " + s.error_message());
          if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
            return Status::Unauthenticated("master " + address_ + ": " + what +
                                           ": refused this process's job " +
                                           "credentials: " + s.error_message());
          }
          if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
              s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
            return last;
          }
        }
      } else {
        last = Status::Unavailable("cannot connect to the master at " + address_);
      }
      stub_.reset();  // look for the leader again
    } else {
      last = r;
      if (r.code() != StatusCode::kUnavailable && r.code() != StatusCode::kDeadlineExceeded) return r;
    }
    std::this_thread::sleep_for(std::min(backoff.Next(), deadline.remaining()));
  }
  return last;
}

StatusOr<GetTaskReply> MasterClient::GetTask(const std::string& trainer, const Deadline& deadline,
                                             const std::vector<std::pair<int64_t, int64_t>>* held) {
  GetTaskRequest req;
  req.set_job_token(token_);
  req.set_trainer(trainer);
  if (held != nullptr) {
    req.set_held_listed(true);
    for (const auto& [id, epoch] : *held) {
      HeldTask* h = req.add_held();
      h->set_id(id);
      h->set_epoch(epoch);
    }
  }
  GetTaskReply reply;
  TESSERA_RETURN_IF_ERROR(
      Call("get task", "GetTask", req, deadline, [&](Master::Stub& s, grpc::ClientContext* c) {
        reply.Clear();
        return s.GetTask(c, req, &reply);
      }));
  return reply;
}

StatusOr<bool> MasterClient::Finish(const std::string& trainer, int64_t task, int64_t epoch,
                                    const Deadline& deadline, int64_t step) {
  TaskResult req;
  req.set_job_token(token_);
  req.set_trainer(trainer);
  req.set_task_id(task);
  req.set_epoch(epoch);
  req.set_step(step);
  TaskResultReply reply;
  TESSERA_RETURN_IF_ERROR(
      Call("finish task", "FinishTask", req, deadline,
           [&](Master::Stub& s, grpc::ClientContext* c) { return s.FinishTask(c, req, &reply); }));
  return reply.accepted();
}

StatusOr<bool> MasterClient::Fail(const std::string& trainer, int64_t task, int64_t epoch,
                                  const std::string& reason, const Deadline& deadline) {
  TaskResult req;
  req.set_job_token(token_);
  req.set_trainer(trainer);
  req.set_task_id(task);
  req.set_epoch(epoch);
  req.set_error(reason);
  TaskResultReply reply;
  TESSERA_RETURN_IF_ERROR(
      Call("fail task", "FailTask", req, deadline,
           [&](Master::Stub& s, grpc::ClientContext* c) { return s.FailTask(c, req, &reply); }));
  return reply.accepted();
}

StatusOr<StatusReply> MasterClient::GetStatus(const Deadline& deadline) {
  StatusRequest req;
  StatusReply reply;
  TESSERA_RETURN_IF_ERROR(
      Call("status", "GetStatus", req, deadline,
           [&](Master::Stub& s, grpc::ClientContext* c) { return s.GetStatus(c, req, &reply); }));
  return reply;
}

StatusOr<std::chrono::milliseconds> MasterClient::Report(const ProgressReport& report,
                                                         const Deadline& deadline) {
  ProgressReport req = report;
  req.set_job_token(token_);
  ProgressReply reply;
  TESSERA_RETURN_IF_ERROR(
      Call("report", "Report", req, deadline,
           [&](Master::Stub& s, grpc::ClientContext* c) { return s.Report(c, req, &reply); }));
  return std::chrono::milliseconds(reply.progress_every_ms());
}

Status MasterClient::ReportPosition(const PositionReport& report, const Deadline& deadline) {
  PositionReport req = report;
  req.set_job_token(token_);
  PositionReply reply;
  return Call("report position", "ReportPosition", req, deadline,
              [&](Master::Stub& s, grpc::ClientContext* c) { return s.ReportPosition(c, req, &reply); });
}

StatusOr<MasterClient::TaskProgressAnswer> MasterClient::ReportTaskProgress(const std::string& trainer,
                                                                            int64_t task, int64_t epoch,
                                                                            int64_t offset, int64_t records,
                                                                            int64_t read_ahead,
                                                                            const Deadline& deadline) {
  TaskProgress req;
  req.set_job_token(token_);
  req.set_trainer(trainer);
  req.set_task_id(task);
  req.set_epoch(epoch);
  req.set_offset(offset);
  req.set_records(records);
  req.set_read_ahead(read_ahead);
  TaskProgressReply reply;
  TESSERA_RETURN_IF_ERROR(
      Call("report task progress", "ReportTaskProgress", req, deadline,
           [&](Master::Stub& s, grpc::ClientContext* c) { return s.ReportTaskProgress(c, req, &reply); }));
  return TaskProgressAnswer{reply.end_record(), std::chrono::milliseconds(reply.task_progress_every_ms())};
}

}  // namespace tessera::master
