// LinkRecovery: what a pserver link asks of its trainer when it meets a pserver that restarted
// (PserverLink::Owner): the identity stamped on every request, re-initializing a pserver that lost
// its parameters from this trainer's values, and joining its consistency group again. It is not
// the Client: it holds the trainer's membership, its parameters' layout and the pservers' directory,
// and nothing of the steps being sent, so the links call into nothing else. Thread-safe as its
// parts: links call it from their threads; everything it reads is fixed once training starts.
#pragma once

#include "client/pserver_directory.h"
#include "client/pserver_link.h"
#include "client/request_builder.h"
#include "client/trainer_membership.h"
#include "job/job_config.h"

namespace tessera {

class LinkRecovery : public PserverLink::Owner {
 public:
  LinkRecovery(const JobConfig& job, const TrainerMembership& member, const RequestBuilder& builder,
               const PserverDirectory& directory, bool allow_nonfinite)
      : job_(job),
        member_(member),
        builder_(builder),
        directory_(directory),
        allow_nonfinite_(allow_nonfinite) {}

  void Stamp(wire::DataRequest* req) override;
  Status Reinitialize(PserverLink& link, const Deadline& d, int64_t step) override;
  Status Rejoin(PserverLink& link, const Deadline& d, int64_t step) override;
  // Gives the pserver of `link` this trainer's values at `step` (INIT, then INIT_DONE).
  Status InitPserver(PserverLink& link, const Deadline& d, int64_t step) const;

 private:
  const JobConfig& job_;
  const TrainerMembership& member_;
  const RequestBuilder& builder_;
  const PserverDirectory& directory_;
  const bool allow_nonfinite_;
};

}  // namespace tessera
