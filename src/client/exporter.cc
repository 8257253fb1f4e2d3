// ExportModel (see exporter.h).
#include "client/exporter.h"

#include <algorithm>
#include <thread>

#include "client/pserver_directory.h"
#include "common/clock.h"
#include "common/random.h"
#include "coord/keys.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/placement.h"
#include "job/slot_map.h"
#include "job/wire_convert.h"
#include "tessera/data.pb.h"
#include "transport/endpoint_choice.h"
#include "transport/transport_factory.h"

namespace tessera {
namespace {

struct Conn {
  std::unique_ptr<ClientConnection> conn;
  PserverAddress addr;
};

// Sends `req` to pserver `index`; the reply payload (of `*payload_bytes`) lands in `out`. The
// reply comes back whatever its status (Call checks it).
StatusOr<wire::DataReply> Exchange(Conn& c, int index, const std::string& token, wire::DataRequest req,
                                   std::span<const MutableBuffer> out, const Deadline& d,
                                   size_t* payload_bytes = nullptr) {
  req.set_job_token(token);
  req.set_pserver_index(index);
  req.set_pserver_epoch(c.addr.epoch);
  req.set_trainer("export");
  TESSERA_ASSIGN_OR_RETURN(CallResult r, c.conn->Call(req.SerializeAsString(), {}, out, d.remaining()));
  if (payload_bytes) *payload_bytes = r.payload_bytes;
  wire::DataReply reply;
  if (!reply.ParseFromArray(r.header.data(), static_cast<int>(r.header.size())))
    return Status::DataLoss("pserver " + std::to_string(index) + ": malformed reply");
  return reply;
}

StatusOr<wire::DataReply> Call(Conn& c, int index, const std::string& token, wire::DataRequest req,
                               std::span<const MutableBuffer> out, const Deadline& d,
                               size_t* payload_bytes = nullptr) {
  TESSERA_ASSIGN_OR_RETURN(auto reply, Exchange(c, index, token, std::move(req), out, d, payload_bytes));
  TESSERA_RETURN_IF_ERROR(ReplyStatus(reply).WithContext("pserver " + std::to_string(index)));
  return reply;
}

wire::DataRequest ExportRequest(wire::DataRequest::Op op, uint64_t id) {
  wire::DataRequest r;
  r.set_op(op);
  r.set_export_id(id);
  return r;
}

// Drops cut `id` on every pserver (best effort: an unreleased cut expires by itself).
void ReleaseCut(std::vector<Conn>& conns, const std::string& token, uint64_t id) {
  Deadline d(std::chrono::seconds(2));
  for (int p = 0; p < static_cast<int>(conns.size()); ++p)
    (void)Exchange(conns[p], p, token, ExportRequest(wire::DataRequest::EXPORT_RELEASE, id), {}, d);
}

// Asks every pserver for cut `id` at `target` (-1: each now) and waits until all took it.
// Returns the version of pserver 0's copy, or -1 if a pserver was already past `target`;
// `*newest` becomes the highest version any pserver reported.
StatusOr<int64_t> TakeCut(std::vector<Conn>& conns, const std::string& token, uint64_t id, int64_t target,
                          int64_t* newest, const Deadline& d) {
  const int n = static_cast<int>(conns.size());
  std::vector<int64_t> taken(n, -1);
  wire::DataRequest ask = ExportRequest(wire::DataRequest::EXPORT_CUT, id);
  ask.set_step(target);
  for (int round = 0;; ++round) {
    int waiting = 0;
    for (int p = 0; p < n; ++p) {
      if (taken[p] >= 0) continue;
      TESSERA_ASSIGN_OR_RETURN(auto reply, Exchange(conns[p], p, token, ask, {}, d));
      *newest = std::max(*newest, reply.version());
      if (reply.reason() == wire::DataReply::CUT_PASSED) return int64_t{-1};
      TESSERA_RETURN_IF_ERROR(ReplyStatus(reply).WithContext("pserver " + std::to_string(p)));
      if (reply.export_ready()) {
        taken[p] = reply.version();
      } else {
        ++waiting;
      }
    }
    if (waiting == 0) return taken[0];
    if (d.expired()) {
      return Status::DeadlineExceeded("waiting for every pserver to reach version " + std::to_string(target) +
                                      " (is the job stalled? its trainers have stopped between two pservers' "
                                      "barriers)");
    }
    // The slower pservers are at most one barrier behind: they are close.
    std::this_thread::sleep_for(std::chrono::milliseconds(round < 50 ? 2 : 20));
  }
}

}  // namespace

StatusOr<models::ModelFile> ExportModel(etcd::EtcdClient* etcd, const std::string& job,
                                        const security::JobSecret& secret, std::chrono::milliseconds timeout,
                                        std::shared_ptr<const security::TlsConfig> tls) {
  Deadline d(timeout);
  TESSERA_ASSIGN_OR_RETURN(JobConfig cfg, LoadJobConfig(etcd, job));
  TESSERA_ASSIGN_OR_RETURN(SlotMap slots, LoadSlotMap(etcd, job));
  PserverDirectory dir(etcd, job, cfg.pservers);
  TESSERA_RETURN_IF_ERROR(dir.WaitAllReady(d).WithContext(
      "waiting for every pserver to hold the model (a trainer initializes them when it joins; none has "
      "yet, or a pserver was replaced and not yet restored)"));
  std::vector<Conn> conns(cfg.pservers);
  const std::string host = HostIdentity();
  for (int p = 0; p < cfg.pservers; ++p) {
    TESSERA_ASSIGN_OR_RETURN(conns[p].addr, dir.Resolve(p, d));
    TESSERA_ASSIGN_OR_RETURN(auto choice,
                             ChooseEndpoint(conns[p].addr.endpoints, TransportKind::kAuto, host));
    TransportOptions to;
    to.secret = secret;
    to.tls = tls;
    conns[p].conn = NewClientConnection(choice.kind, choice.endpoint, to);
  }
  wire::DataRequest describe;
  describe.set_op(wire::DataRequest::DESCRIBE);
  TESSERA_ASSIGN_OR_RETURN(auto desc, Call(conns[0], 0, cfg.token, describe, {}, d));

  // The cut: in a sync job every pserver copies its shard at one version, the newest one any of
  // them has reached (the others are one barrier behind at most); a pserver already past it makes
  // the next try aim ahead. In async and ssp there is no common version: each copies at once.
  const bool sync = cfg.mode.kind == ConsistencyMode::Kind::kSync;
  int64_t newest = desc.version();
  for (int p = 1; sync && p < cfg.pservers; ++p) {
    wire::DataRequest status;
    status.set_op(wire::DataRequest::STATUS);
    TESSERA_ASSIGN_OR_RETURN(auto st, Call(conns[p], p, cfg.token, status, {}, d));
    newest = std::max(newest, st.version());
  }
  uint64_t id = 0;
  int64_t version = -1;
  constexpr int kTries = 8;
  for (int attempt = 0; attempt < kTries && version < 0; ++attempt) {
    id = RandomSeed() | 1;
    const int64_t target = sync ? newest + 2 * attempt : -1;
    auto taken = TakeCut(conns, cfg.token, id, target, &newest, d);
    if (!taken.ok() || *taken < 0) ReleaseCut(conns, cfg.token, id);
    if (!taken.ok()) return taken.status().WithContext("taking a consistent cut of the model");
    version = *taken;
  }
  if (version < 0) {
    return Status::Unavailable("the job moved past every version the export asked for (" +
                               std::to_string(kTries) + " tries); try again");
  }
  struct Release {
    std::vector<Conn>* conns;
    const std::string* token;
    uint64_t id;
    ~Release() { ReleaseCut(*conns, *token, id); }
  } release{&conns, &cfg.token, id};

  models::ModelFile m;
  m.job = job;
  m.step = version;
  m.created_ms = WallMillis();
  for (const auto& spec : desc.params_spec()) {
    models::ModelTensor t;
    t.name = spec.name();
    t.sparse = spec.sparse();
    if (!t.sparse) {
      t.size = spec.size();
      t.values.assign(t.size, 0.0f);
      BlockLayout layout{t.size, cfg.block_size};
      for (int p = 0; p < cfg.pservers; ++p) {
        wire::DataRequest pull = ExportRequest(wire::DataRequest::EXPORT_READ, id);
        std::vector<MutableBuffer> out;
        for (int64_t b = 0; b < layout.blocks(); ++b) {
          if (slots.PserverOf(SlotOfBlock(t.name, b, slots.slots())) != p) continue;
          wire::Segment* s = pull.add_pull();
          s->set_param(t.name);
          s->set_block(b);
          s->set_count(layout.length(b));
          s->set_dtype(wire::FLOAT32);
          out.push_back(
              {t.values.data() + layout.begin(b), static_cast<size_t>(layout.length(b)) * sizeof(float)});
        }
        if (out.empty()) continue;
        size_t got = 0;
        TESSERA_RETURN_IF_ERROR(Call(conns[p], p, cfg.token, pull, out, d, &got)
                                    .status()
                                    .WithContext("reading '" + t.name + "'"));
        if (got != TotalSize(out))
          return Status::DataLoss("pserver " + std::to_string(p) + " sent a short read of '" + t.name + "'");
      }
    } else {
      t.dim = spec.dim();
      constexpr int64_t kPage = 65536;
      std::vector<float> page(static_cast<size_t>(kPage) * t.dim);
      for (int p = 0; p < cfg.pservers; ++p) {
        int64_t cursor = 0;
        while (cursor >= 0) {
          wire::DataRequest read = ExportRequest(wire::DataRequest::EXPORT_READ, id);
          read.add_pull()->set_param(t.name);
          read.set_step(cursor);
          read.set_samples(kPage);
          MutableBuffer buf{page.data(), page.size() * sizeof(float)};
          size_t got = 0;
          auto r = Call(conns[p], p, cfg.token, read, std::span<const MutableBuffer>(&buf, 1), d, &got);
          if (!r.ok()) return r.status().WithContext("reading table '" + t.name + "'");
          const auto& seg = r->pull(0);
          if (got != static_cast<size_t>(seg.keys_size()) * t.dim * sizeof(float) ||
              seg.keys_size() > kPage) {
            return Status::DataLoss("pserver " + std::to_string(p) + " sent a page of '" + t.name +
                                    "' of the wrong size");
          }
          t.keys.insert(t.keys.end(), seg.keys().begin(), seg.keys().end());
          t.values.insert(t.values.end(), page.begin(),
                          page.begin() + static_cast<size_t>(seg.keys_size()) * t.dim);
          if (r->resume_step() >= 0 && r->resume_step() <= cursor)
            return Status::DataLoss("pserver " + std::to_string(p) + " sent a page that does not move on");
          cursor = r->resume_step();
        }
      }
    }
    m.tensors.push_back(std::move(t));
  }
  return m;
}

}  // namespace tessera
