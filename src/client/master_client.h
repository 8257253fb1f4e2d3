// MasterClient: how trainers (and `tessera status`) talk to a job's leading master. It finds
// the leader in etcd (the oldest key under master/election/), calls it, and when the call
// fails because the master died, was deposed or is a standby, looks for the leader again and
// retries with backoff until the deadline. It watches the election: a call to a leader whose key
// disappears (a frozen master's lease expired) is cancelled at once and sent to the new leader.
// Thread-safe (calls are serialized).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "coord/connection_sharing.h"
#include "coord/etcd_client.h"
#include "coord/registry.h"
#include "security/rpc_auth.h"
#include "security/tls_config.h"
#include "tessera/master.grpc.pb.h"
#include "tessera/status.h"

namespace tessera::master {

class MasterClient {
 public:
  // `secret`: the job's (job_connection.h); every call carries a token made with it
  // (security/rpc_auth.h). Empty for a job without one.
  // `tls`: the job's (null: plaintext).
  MasterClient(etcd::EtcdClient* etcd, std::string job, std::string job_token,
               const security::JobSecret& secret, std::shared_ptr<const security::TlsConfig> tls = nullptr);
  ~MasterClient();

  // `held`: the tasks (id, epoch) the trainer holds, so that one dispatched to it whose answer
  // was lost is handed out again (GetTaskRequest.held); null: not said (such a task waits for
  // its timeout).
  StatusOr<GetTaskReply> GetTask(const std::string& trainer, const Deadline& deadline,
                                 const std::vector<std::pair<int64_t, int64_t>>* held = nullptr);
  // True if accepted; false if stale (the task had been handed to someone else).
  // `step`: the trainer's step now (every record of the task is in the model at it), or -1.
  StatusOr<bool> Finish(const std::string& trainer, int64_t task, int64_t epoch, const Deadline& deadline,
                        int64_t step = -1);
  StatusOr<bool> Fail(const std::string& trainer, int64_t task, int64_t epoch, const std::string& reason,
                      const Deadline& deadline);
  StatusOr<StatusReply> GetStatus(const Deadline& deadline);
  // Returns how long the master asks the trainer to wait before its next report (0: not said).
  StatusOr<std::chrono::milliseconds> Report(const ProgressReport& report, const Deadline& deadline);
  Status ReportPosition(const PositionReport& report, const Deadline& deadline);
  // How far `trainer` got in its task: `offset` of `records` read, and it may read `read_ahead`
  // more before it takes the answer. The answer: the record to stop before (after offset +
  // read_ahead) when the rest was split off for an idle trainer, or 0 (go on); and how long the
  // master asks the trainer to wait before its next such report (0: not said).
  struct TaskProgressAnswer {
    int64_t end_record = 0;
    std::chrono::milliseconds next{0};
  };
  StatusOr<TaskProgressAnswer> ReportTaskProgress(const std::string& trainer, int64_t task, int64_t epoch,
                                                  int64_t offset, int64_t records, int64_t read_ahead,
                                                  const Deadline& deadline);
  // The leader's address as last resolved ("" if none yet).
  std::string leader() const;

 private:
  // `method` and `body` (the serialized request) are what the call's job token is bound to.
  template <typename Fn>
  Status Call(const char* what, const char* method, const google::protobuf::Message& request,
              const Deadline& deadline, Fn fn);
  Status Resolve(const Deadline& deadline);
  // From the election watch: the candidates changed.
  void OnCandidates(const MemberList& list);

  etcd::EtcdClient* etcd_;
  const std::string job_;
  const std::string token_;
  std::optional<security::RpcAuth> auth_;
  std::shared_ptr<const security::TlsConfig> tls_;
  const int64_t connection_group_ = NextConnectionGroup();  // -1: a connection of its own
  mutable std::mutex mu_;  // serializes calls; guards the fields below it
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Master::Stub> stub_;
  std::unique_ptr<MemberWatch> watch_;  // started with the first call

  std::mutex ctx_mu_;       // guards the fields below (the watch's thread reads them)
  std::string called_key_;  // the election key of the master being called
  std::string leader_key_;  // the leader's key as the watch last saw it
  bool watched_ = false;    // the watch has reported
  grpc::ClientContext* active_ = nullptr;
};

}  // namespace tessera::master
