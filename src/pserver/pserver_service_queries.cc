// PserverService's read-only requests (see pserver_service.h): STATUS (counters, members,
// parameters), DESCRIBE (the declarations, for a trainer restoring a replaced pserver or the
// exporter) and the export's cuts (EXPORT_CUT, EXPORT_READ, EXPORT_RELEASE: ExportCuts).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
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
    h.set_waiting_pulls(static_cast<int64_t>(pulls_.size()));
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

void PserverService::HandleDescribe(std::unique_ptr<Responder> r) {
  Reply rep;
  {
    MutexLock lock(&mu_);
    if (!initialized_) {
      lock.Unlock();
      return SendError(
          *r, Status::FailedPrecondition("pserver " + std::to_string(options_.index) + " is not initialized"),
          wire::DataReply::NOT_INITIALIZED);
    }
    rep.header.set_version(consistency_->version());
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
  }
  rep.responder = std::move(r);
  Send(rep);
}

void PserverService::HandleExport(const wire::DataRequest& req, std::unique_ptr<Responder> r) {
  const std::string me = "pserver " + std::to_string(options_.index);
  const uint64_t id = req.export_id();
  if (id == 0) {
    return SendError(*r, Status::InvalidArgument("an export request needs an export_id"),
                     wire::DataReply::BAD_REQUEST);
  }
  if (req.op() == wire::DataRequest::EXPORT_CUT && req.step() < -1) {
    return SendError(*r, Status::InvalidArgument("an export cut's version must be -1 (now) or >= 0"),
                     wire::DataReply::BAD_REQUEST);
  }
  const int64_t now = std::chrono::duration_cast<Millis>(Now().time_since_epoch()).count();
  Reply rep;
  std::shared_ptr<const ShardValues> cut;
  Status error;
  wire::DataReply::Reason reason = wire::DataReply::NONE;
  {
    MutexLock lock(&mu_);
    const int64_t version = consistency_->version();
    rep.header.set_version(version);
    if (!initialized_) {
      error = Status::FailedPrecondition(me + " is not initialized");
      reason = wire::DataReply::NOT_INITIALIZED;
    } else if (req.op() == wire::DataRequest::EXPORT_RELEASE) {
      cuts_.Release(id);
    } else if (req.op() == wire::DataRequest::EXPORT_CUT) {
      // While some blocks are a step ahead (pushes in pieces), the current version cannot be
      // copied any more: the exporter asks for a later one.
      auto action = mixed() && (req.step() == version || req.step() == -1) && !cuts_.Get(id, now)
                        ? ExportCuts<ShardValues>::Action::kPassed
                        : cuts_.Ask(id, req.step(), version, now);
      if (action == ExportCuts<ShardValues>::Action::kTake) TakeDueCuts();
      if (action == ExportCuts<ShardValues>::Action::kPassed) {
        error = Status::FailedPrecondition(me + " is at version " + std::to_string(version) +
                                           ", past the version " + std::to_string(req.step()) +
                                           " the export asked for");
        reason = wire::DataReply::CUT_PASSED;
      } else if ((cut = cuts_.Get(id, now))) {
        rep.header.set_export_ready(true);
        rep.header.set_version(cut->version);
      }
    } else if (!(cut = cuts_.Get(id, now))) {
      error = Status::NotFound(me + " holds no export cut " + std::to_string(id) +
                               " (released, or dropped after a minute unread or for a newer export)");
      reason = wire::DataReply::CUT_UNKNOWN;
    }
  }
  if (error.ok() && req.op() == wire::DataRequest::EXPORT_READ) {
    error = ReadCut(*cut, req, &rep);
    reason = wire::DataReply::BAD_REQUEST;
  }
  if (!error.ok()) return SendError(*r, error, reason);
  rep.responder = std::move(r);
  Send(rep);
}

Status PserverService::ReadCut(const ShardValues& cut, const wire::DataRequest& req, Reply* rep) const {
  const std::string me = "pserver " + std::to_string(options_.index);
  wire::DataReply& h = rep->header;
  h.set_version(cut.version);
  if (req.pull_size() == 1 && cut.sparse.count(req.pull(0).param())) {
    const ShardValues::Table& t = cut.sparse.at(req.pull(0).param());
    const int64_t rows = static_cast<int64_t>(t.keys.size());
    const int64_t first = req.step();
    if (first < 0 || first > rows) {
      return Status::InvalidArgument("table '" + req.pull(0).param() + "' has " + std::to_string(rows) +
                                     " rows on " + me + "; no row " + std::to_string(first));
    }
    // A page is at most 64 MiB of values.
    const int64_t cap = std::max<int64_t>(1, (int64_t{16} << 20) / std::max(1, t.dim));
    const int64_t end = std::min(rows, first + std::min(cap, req.samples() > 0 ? req.samples() : 65536));
    wire::Segment* seg = h.add_pull();
    seg->set_param(req.pull(0).param());
    seg->set_block(-1);
    seg->set_count(end - first);
    seg->set_dtype(wire::FLOAT32);
    for (int64_t k = first; k < end; ++k) seg->add_keys(t.keys[k]);
    rep->owned.assign(t.values.begin() + first * t.dim, t.values.begin() + end * t.dim);
    h.set_resume_step(end < rows ? end : -1);
  } else {
    for (const auto& seg : req.pull()) {
      if (cut.sparse.count(seg.param())) {
        return Status::InvalidArgument("an export read names a sparse table alone, but '" + seg.param() +
                                       "' came with other segments");
      }
      auto it = cut.dense.find({seg.param(), seg.block()});
      if (it == cut.dense.end()) {
        return Status::InvalidArgument("block " + std::to_string(seg.block()) + " of '" + seg.param() +
                                       "' is not held by " + me);
      }
      if (seg.count() != static_cast<int64_t>(it->second.size())) {
        return Status::InvalidArgument("block " + std::to_string(seg.block()) + " of '" + seg.param() +
                                       "' has " + std::to_string(it->second.size()) + " values, not " +
                                       std::to_string(seg.count()));
      }
      rep->owned.insert(rep->owned.end(), it->second.begin(), it->second.end());
    }
    *h.mutable_pull() = req.pull();
  }
  rep->payload = {rep->owned.data(), rep->owned.size() * sizeof(float)};
  return Status::OK();
}

void PserverService::TakeDueCuts() {
  const int64_t v = consistency_->version();
  const std::vector<uint64_t> ids = cuts_.VersionReached(v);
  if (ids.empty()) return;
  const auto start = Now();
  auto cut = std::make_shared<ShardValues>(store_.ValuesCopy());
  cut->version = v;
  for (uint64_t id : ids) cuts_.Put(id, cut);
  spdlog::info("pserver {}: export cut of version {} taken ({:.1f} MiB in {} ms)", options_.index, v,
               static_cast<double>(cut->bytes()) / (1 << 20),
               std::chrono::duration_cast<Millis>(Now() - start).count());
}

}  // namespace tessera
