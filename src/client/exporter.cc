// ExportModel (see exporter.h).
#include "client/exporter.h"

#include "client/pserver_directory.h"
#include "common/clock.h"
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

// Sends `req` to pserver `index`; the reply payload (of `*payload_bytes`) lands in `out`.
StatusOr<wire::DataReply> Call(Conn& c, int index, const std::string& token, wire::DataRequest req,
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
  TESSERA_RETURN_IF_ERROR(ReplyStatus(reply).WithContext("pserver " + std::to_string(index)));
  return reply;
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
  models::ModelFile m;
  m.job = job;
  m.step = desc.version();
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
        wire::DataRequest pull;
        pull.set_op(wire::DataRequest::DATA);
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
                                    .WithContext("pulling '" + t.name + "'"));
        if (got != TotalSize(out))
          return Status::DataLoss("pserver " + std::to_string(p) + " sent a short pull of '" + t.name + "'");
      }
    } else {
      t.dim = spec.dim();
      for (int p = 0; p < cfg.pservers; ++p) {
        int64_t cursor = 0;
        while (cursor >= 0) {
          wire::DataRequest dump;
          dump.set_op(wire::DataRequest::DUMP_SPARSE);
          dump.add_pull()->set_param(t.name);
          dump.set_step(cursor);
          dump.set_samples(65536);
          // A page holds at most 65536 rows; the reply header says how many came.
          std::vector<float> page(static_cast<size_t>(65536) * t.dim);
          MutableBuffer buf{page.data(), page.size() * sizeof(float)};
          size_t got = 0;
          auto r = Call(conns[p], p, cfg.token, dump, std::span<const MutableBuffer>(&buf, 1), d, &got);
          if (!r.ok()) return r.status().WithContext("reading table '" + t.name + "'");
          const auto& seg = r->pull(0);
          if (got != static_cast<size_t>(seg.keys_size()) * t.dim * sizeof(float)) {
            return Status::DataLoss("pserver " + std::to_string(p) + " sent a page of '" + t.name +
                                    "' of the wrong size");
          }
          for (int i = 0; i < seg.keys_size(); ++i) t.keys.push_back(seg.keys(i));
          t.values.insert(t.values.end(), page.begin(),
                          page.begin() + static_cast<size_t>(seg.keys_size()) * t.dim);
          cursor = r->resume_step();
        }
      }
    }
    m.tensors.push_back(std::move(t));
  }
  return m;
}

}  // namespace tessera
