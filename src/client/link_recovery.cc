// LinkRecovery: see link_recovery.h.
#include "client/link_recovery.h"

#include <spdlog/spdlog.h>

#include "common/logging.h"

namespace tessera {

void LinkRecovery::Stamp(wire::DataRequest* req) {
  req->set_job_token(job_.token);
  req->set_trainer(member_.id());
  req->set_trainer_epoch(member_.epoch());
  req->set_allow_nonfinite(allow_nonfinite_);
}

Status LinkRecovery::InitPserver(PserverLink& link, const Deadline& d, int64_t step) const {
  LinkCall init;
  builder_.BuildInit(link.index(), &init);
  init.req.set_step(step);
  TESSERA_RETURN_IF_ERROR(link.Run(init, d, /*recover=*/false).status());
  LinkCall done;
  done.req.set_op(wire::DataRequest::INIT_DONE);
  return link.Run(done, d, /*recover=*/false).status();
}

Status LinkRecovery::Reinitialize(PserverLink& link, const Deadline& d, int64_t step) {
  if (!directory_.Ready(link.index())) {
    spdlog::warn(
        "{}pserver {} restarted without its parameters; re-initializing it from trainer {}'s copy at step {} "
        "(optimizer state and sparse rows on it start over; checkpoints or replicas keep them)",
        kNoticeMark, link.index(), member_.id(), step);
    TESSERA_RETURN_IF_ERROR(InitPserver(link, d, step));
  }
  return Rejoin(link, d, step);
}

Status LinkRecovery::Rejoin(PserverLink& link, const Deadline& d, int64_t step) {
  LinkCall call;
  call.req.set_op(wire::DataRequest::JOIN);
  call.req.set_step(step);
  return link.Run(call, d, /*recover=*/false).status();
}

}  // namespace tessera
