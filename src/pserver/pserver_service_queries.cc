// PserverService's read-only requests (see pserver_service.h): STATUS (counters, members,
// parameters), DESCRIBE (the declarations, for a trainer restoring a replaced pserver or the
// exporter) and DUMP_SPARSE (a sparse table's rows, page by page, for the exporter).
#include "job/wire_convert.h"
#include "pserver/pserver_service.h"

namespace tessera {

void PserverService::HandleStatus(std::unique_ptr<Responder> r) {
  Reply rep;
  {
    MutexLock lock(&mu_);
    auto& h = rep.header;
    h.set_version(consistency_->version());
    h.set_min_clock(consistency_->min_clock());
    h.set_initialized(initialized_);
    h.set_pushes(counters_.pushes);
    h.set_pulls(counters_.pulls);
    h.set_refused(counters_.refused);
    h.set_skipped(counters_.skipped);
    h.set_mode(options_.job.mode.ToString());
    h.set_waiting_pulls(static_cast<int64_t>(waiting_.size()));
    for (const auto& m : consistency_->members()) h.add_trainers(m);
    for (const auto& p : store_.Stats()) {
      auto* ps = h.add_params();
      ps->set_name(p.name);
      ps->set_sparse(p.sparse);
      ps->set_elements(p.elements);
      ps->set_bytes(p.bytes);
      ps->set_admitted(p.admitted);
      ps->set_evicted(p.evicted);
    }
  }
  rep.responder = std::move(r);
  Send(rep);
}

void PserverService::HandleExport(const wire::DataRequest& req, std::unique_ptr<Responder> r) {
  Reply rep;
  {
    MutexLock lock(&mu_);
    if (!initialized_) {
      return SendError(
          *r, Status::FailedPrecondition("pserver " + std::to_string(options_.index) + " is not initialized"),
          wire::DataReply::NOT_INITIALIZED);
    }
    rep.header.set_version(consistency_->version());
    if (req.op() == wire::DataRequest::DESCRIBE) {
      for (const auto& d : store_.Declarations()) {
        wire::ParamSpec* p = rep.header.add_params_spec();
        p->set_name(d.name);
        p->set_sparse(d.sparse);
        p->set_size(d.size);
        p->set_dim(d.dim);
        *p->mutable_optimizer() = ToWire(d.optimizer);
        *p->mutable_init() = ToWire(d.init);
        if (d.sparse) *p->mutable_limits() = ToWire(d.limits);
      }
    } else {
      if (req.pull_size() != 1 || !store_.IsSparse(req.pull(0).param())) {
        return SendError(*r, Status::InvalidArgument("DUMP_SPARSE names one sparse table in pull[0]"),
                         wire::DataReply::BAD_REQUEST);
      }
      std::vector<uint64_t> keys;
      int64_t next = store_.DumpRows(req.pull(0).param(), req.step(),
                                     req.samples() > 0 ? req.samples() : 65536, &keys, &rep.owned);
      rep.payload = {rep.owned.data(), rep.owned.size() * sizeof(float)};
      wire::Segment* seg = rep.header.add_pull();
      seg->set_param(req.pull(0).param());
      seg->set_block(-1);
      seg->set_count(static_cast<int64_t>(keys.size()));
      seg->set_dtype(wire::FLOAT32);
      for (uint64_t k : keys) seg->add_keys(k);
      rep.header.set_resume_step(next);
    }
  }
  rep.responder = std::move(r);
  Send(rep);
}

}  // namespace tessera
