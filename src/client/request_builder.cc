// RequestBuilder (see request_builder.h).
#include "client/request_builder.h"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <cmath>

#include "common/finite.h"
#include "job/wire_convert.h"

namespace tessera {
namespace {

// A dense block's segment: in float32 (INIT), or as the job's wire format sends it (a push's
// coding, a pull's or a push's type).
wire::Segment DenseSegment(const std::string& name, int64_t block, int64_t count,
                           wire::DType dtype = wire::FLOAT32, wire::Coding coding = wire::PLAIN) {
  wire::Segment s;
  s.set_param(name);
  s.set_block(block);
  s.set_count(count);
  s.set_dtype(dtype);
  s.set_coding(coding);
  return s;
}

}  // namespace

RequestBuilder::RequestBuilder(const JobConfig& job, const SlotMap& slots) : job_(job), slots_(slots) {}

Status RequestBuilder::AddDense(const std::string& name, float* values, size_t size,
                                const OptimizerConfig& opt) {
  if (name.empty()) return Status::InvalidArgument("a parameter needs a name");
  if (dense_index_.count(name) || sparse_index_.count(name)) {
    return Status::AlreadyExists("parameter '" + name + "' is declared twice");
  }
  if (size == 0 || values == nullptr)
    return Status::InvalidArgument("dense parameter '" + name + "' needs a buffer");
  TESSERA_RETURN_IF_ERROR(opt.Validate().WithContext("parameter '" + name + "'"));
  DenseParamInfo d;
  d.name = name;
  d.values = values;
  d.size = size;
  d.optimizer = opt;
  d.layout = BlockLayout{static_cast<int64_t>(size), job_.block_size};
  d.blocks_of.resize(slots_.pservers());
  for (int64_t b = 0; b < d.layout.blocks(); ++b) {
    d.blocks_of[slots_.PserverOf(SlotOfBlock(name, b, slots_.slots()))].push_back(b);
  }
  dense_index_[name] = dense_.size();
  dense_.push_back(std::move(d));
  return Status::OK();
}

Status RequestBuilder::AddSparse(const std::string& name, int dim, const InitializerConfig& init,
                                 const OptimizerConfig& opt, const TableLimits& limits) {
  if (name.empty()) return Status::InvalidArgument("a sparse table needs a name");
  if (dense_index_.count(name) || sparse_index_.count(name)) {
    return Status::AlreadyExists("parameter '" + name + "' is declared twice");
  }
  if (dim < 1) return Status::InvalidArgument("sparse table '" + name + "' needs dim >= 1");
  TESSERA_RETURN_IF_ERROR(opt.Validate().WithContext("table '" + name + "'"));
  TESSERA_RETURN_IF_ERROR(limits.Validate().WithContext("table '" + name + "'"));
  sparse_index_[name] = sparse_.size();
  sparse_.push_back({name, dim, init, opt, limits});
  return Status::OK();
}

std::string RequestBuilder::FindNonFinite(const Gradients& grads) const {
  for (const auto& g : grads.dense) {
    int64_t at = FirstNonFinite(g.grad.data(), g.grad.size());
    if (at >= 0) return "'" + g.name + "' element " + std::to_string(at + g.offset);
  }
  for (const auto& s : grads.sparse) {
    int64_t at = FirstNonFinite(s.grads.data(), s.grads.size());
    if (at < 0) continue;
    size_t dim = s.keys.empty() ? 1 : s.grads.size() / s.keys.size();
    size_t row = static_cast<size_t>(at) / std::max<size_t>(dim, 1);
    return "'" + s.table + "' row of key " + (row < s.keys.size() ? std::to_string(s.keys[row]) : "?");
  }
  return "";
}

void RequestBuilder::AddSkippedPush(const std::string& why,
                                    std::vector<std::unique_ptr<LinkCall>>* calls) const {
  for (auto& c : *calls) {
    c->req.set_is_push(true);
    c->req.set_samples(0);
    c->req.set_skipped(why);
  }
}

Status RequestBuilder::CheckPush(const Gradients& grads, bool ranges) const {
  for (const auto& g : grads.dense) {
    auto it = dense_index_.find(g.name);
    if (it == dense_index_.end())
      return Status::InvalidArgument("push: unknown dense parameter '" + g.name + "'");
    const DenseParamInfo& d = dense_[it->second];
    if (ranges && (g.offset != 0 || g.grad.size() != d.size)) {
      const int64_t end = g.offset + static_cast<int64_t>(g.grad.size());
      if (g.offset < 0 || end > static_cast<int64_t>(d.size) || g.grad.empty() ||
          g.offset % job_.block_size != 0 ||
          (end % job_.block_size != 0 && end != static_cast<int64_t>(d.size))) {
        return Status::InvalidArgument(
            "push: the range [" + std::to_string(g.offset) + ", " + std::to_string(end) + ") of '" + g.name +
            "' (" + std::to_string(d.size) + " elements) does not start and end at blocks of " +
            std::to_string(job_.block_size) + " elements");
      }
      continue;
    }
    if (g.offset != 0) {
      return Status::InvalidArgument("push: a range of '" + g.name + "' needs a push in pieces (PushPiece)");
    }
    if (g.grad.size() != d.size) {
      return Status::InvalidArgument("push: gradient of '" + g.name + "' has " +
                                     std::to_string(g.grad.size()) + " elements, the parameter has " +
                                     std::to_string(dense_[it->second].size));
    }
  }
  for (const auto& s : grads.sparse) {
    auto it = sparse_index_.find(s.table);
    if (it == sparse_index_.end())
      return Status::InvalidArgument("push: unknown sparse table '" + s.table + "'");
    size_t dim = static_cast<size_t>(sparse_[it->second].dim);
    if (s.grads.size() != s.keys.size() * dim) {
      return Status::InvalidArgument("push: table '" + s.table + "' has rows of " + std::to_string(dim) +
                                     ", so " + std::to_string(s.keys.size()) + " keys need " +
                                     std::to_string(s.keys.size() * dim) + " gradient values, not " +
                                     std::to_string(s.grads.size()));
    }
  }
  if ((!grads.dense.empty() || !grads.sparse.empty()) && grads.samples < 1) {
    return Status::InvalidArgument("push: gradients need a sample count >= 1");
  }
  return Status::OK();
}

Status RequestBuilder::AddPush(const Gradients& grads, std::vector<std::unique_ptr<LinkCall>>* calls,
                               bool ranges, std::vector<std::vector<BlockRef>>* pushed) const {
  TESSERA_RETURN_IF_ERROR(CheckPush(grads, ranges));  // everything before building anything
  for (int p = 0; p < slots_.pservers(); ++p) {
    (*calls)[p]->req.set_is_push(true);
    (*calls)[p]->req.set_samples(grads.samples);
  }
  if (pushed) pushed->assign(slots_.pservers(), {});
  for (const auto& g : grads.dense) {
    const size_t index = dense_index_.at(g.name);
    const DenseParamInfo& d = dense_[index];
    const int64_t end = g.offset + static_cast<int64_t>(g.grad.size());
    for (int p = 0; p < slots_.pservers(); ++p) {
      LinkCall& c = *(*calls)[p];
      for (int64_t b : d.blocks_of[p]) {
        if (d.layout.begin(b) < g.offset || d.layout.begin(b) >= end) continue;
        *c.req.add_push() = DenseSegment(d.name, b, d.layout.length(b), job_.wire.For(d.name).dtype(),
                                         job_.wire.For(d.name).dense_push_coding());
        c.payload.push_back({g.grad.data() + (d.layout.begin(b) - g.offset),
                             static_cast<size_t>(d.layout.length(b)) * sizeof(float)});
        if (pushed) (*pushed)[p].push_back({index, b});
      }
    }
  }
  for (const auto& s : grads.sparse) {
    const SparseTableInfo& t = sparse_[sparse_index_.at(s.table)];
    const size_t dim = static_cast<size_t>(t.dim);
    // Per pserver: unique keys and their summed rows.
    const int n = slots_.pservers();
    std::vector<std::vector<uint64_t>> keys(n);
    std::vector<std::vector<float>> rows(n);
    std::vector<absl::flat_hash_map<uint64_t, size_t>> seen(n);
    for (int p = 0; p < n; ++p) {
      const size_t expect = s.keys.size() / n + 16;
      keys[p].reserve(expect);
      rows[p].reserve(expect * dim);
      seen[p].reserve(expect);
    }
    const uint64_t table_hash = TableSlotHash(t.name);
    for (size_t i = 0; i < s.keys.size(); ++i) {
      int p = slots_.PserverOf(SlotOfKey(table_hash, s.keys[i], slots_.slots()));
      auto [it, inserted] = seen[p].try_emplace(s.keys[i], keys[p].size());
      const float* g = s.grads.data() + i * dim;
      if (inserted) {
        keys[p].push_back(s.keys[i]);
        rows[p].insert(rows[p].end(), g, g + dim);
      } else {
        float* row = rows[p].data() + it->second * dim;
        for (size_t j = 0; j < dim; ++j) row[j] += g[j];
      }
    }
    for (int p = 0; p < slots_.pservers(); ++p) {
      if (keys[p].empty()) continue;
      LinkCall& c = *(*calls)[p];
      wire::Segment* seg = c.req.add_push();
      seg->set_param(t.name);
      seg->set_block(-1);
      seg->set_count(static_cast<int64_t>(keys[p].size()));
      seg->set_dtype(job_.wire.For(t.name).dtype());
      seg->mutable_keys()->Add(keys[p].begin(), keys[p].end());
      c.send_scratch.insert(c.send_scratch.end(), rows[p].begin(), rows[p].end());
    }
  }
  // Sparse rows were appended to send_scratch; point the payload at them now that it is final.
  for (int p = 0; p < slots_.pservers(); ++p) {
    LinkCall& c = *(*calls)[p];
    if (!c.send_scratch.empty())
      c.payload.push_back({c.send_scratch.data(), c.send_scratch.size() * sizeof(float)});
  }
  // The pserver reads the payload in segment order: dense segments were added before sparse ones
  // for every pserver, and the sparse rows are in one trailing buffer in the same order.
  return Status::OK();
}

void RequestBuilder::AddDensePull(std::vector<std::unique_ptr<LinkCall>>* calls) const {
  for (const auto& d : dense_) {
    for (int p = 0; p < slots_.pservers(); ++p) {
      LinkCall& c = *(*calls)[p];
      for (int64_t b : d.blocks_of[p]) {
        *c.req.add_pull() = DenseSegment(d.name, b, d.layout.length(b), job_.wire.For(d.name).dtype());
        c.reply.push_back(
            {d.values + d.layout.begin(b), static_cast<size_t>(d.layout.length(b)) * sizeof(float)});
      }
    }
  }
}

namespace {

// For buffers in order, the part each goes to: parts of whole buffers, each closed once it
// holds `part_bytes` or more.
template <class Buffers>
std::vector<size_t> PartOf(const Buffers& bufs, size_t part_bytes) {
  std::vector<size_t> part_of;
  part_of.reserve(bufs.size());
  size_t part = 0, in_part = 0;
  for (const auto& b : bufs) {
    if (in_part >= part_bytes) {
      ++part;
      in_part = 0;
    }
    part_of.push_back(part);
    in_part += b.size;
  }
  return part_of;
}

// `n` calls of `req` (its segments of the kind being cut removed), owning what `from` owns.
std::vector<std::unique_ptr<LinkCall>> NewParts(size_t n, const wire::DataRequest& req,
                                                const LinkCall& from) {
  std::vector<std::unique_ptr<LinkCall>> parts;
  for (size_t k = 0; k < n; ++k) {
    parts.push_back(std::make_unique<LinkCall>());
    parts.back()->req = req;
    parts.back()->owner = from.owner;
  }
  return parts;
}

}  // namespace

std::vector<std::unique_ptr<LinkCall>> RequestBuilder::SplitPull(std::unique_ptr<LinkCall> call,
                                                                 size_t part_bytes) {
  std::vector<std::unique_ptr<LinkCall>> whole;
  if (part_bytes == 0 || call->req.push_size() > 0 ||
      call->reply.size() != static_cast<size_t>(call->req.pull_size()) || call->after || call->before ||
      call->after_reply || TotalSize(std::span<const MutableBuffer>(call->reply)) < 2 * part_bytes) {
    whole.push_back(std::move(call));
    return whole;
  }
  const std::vector<size_t> part_of = PartOf(call->reply, part_bytes);
  wire::DataRequest common = call->req;
  common.clear_pull();
  auto parts = NewParts(part_of.back() + 1, common, *call);
  for (int i = 0; i < call->req.pull_size(); ++i) {
    LinkCall& part = *parts[part_of[i]];
    *part.req.add_pull() = call->req.pull(i);
    part.reply.push_back(call->reply[i]);
  }
  return parts;
}

std::vector<std::unique_ptr<LinkCall>> RequestBuilder::SplitPush(std::unique_ptr<LinkCall> call,
                                                                 size_t part_bytes) {
  std::vector<std::unique_ptr<LinkCall>> whole;
  auto dense = [&] {
    if (call->payload.size() != static_cast<size_t>(call->req.push_size()) ||
        call->reply.size() != static_cast<size_t>(call->req.pull_size()))
      return false;
    for (const auto& seg : call->req.push())
      if (seg.block() < 0) return false;
    for (const auto& seg : call->req.pull())
      if (seg.block() < 0) return false;
    return true;
  };
  if (part_bytes == 0 || call->after || call->before || call->after_reply || call->req.piece() != 0 ||
      call->req.more_pieces() || TotalSize(std::span<const ConstBuffer>(call->payload)) < 2 * part_bytes ||
      !dense()) {
    whole.push_back(std::move(call));
    return whole;
  }
  const std::vector<size_t> part_of = PartOf(call->payload, part_bytes);
  wire::DataRequest common = call->req;
  common.clear_push();
  common.clear_pull();
  auto parts = NewParts(part_of.back() + 1, common, *call);
  for (size_t k = 0; k < parts.size(); ++k) {
    parts[k]->req.set_piece(static_cast<int32_t>(k));
    parts[k]->req.set_more_pieces(k + 1 < parts.size());
  }
  for (int i = 0; i < call->req.push_size(); ++i) {
    LinkCall& part = *parts[part_of[i]];
    *part.req.add_push() = call->req.push(i);
    part.payload.push_back(call->payload[i]);
  }
  if (call->req.pull_size() > 0) {
    // The pull, after the push: a plain pull of the same blocks, in parts too.
    auto pull = std::make_unique<LinkCall>();
    pull->req = call->req;
    pull->req.clear_push();
    pull->req.set_is_push(false);
    pull->req.set_samples(0);
    pull->reply = std::move(call->reply);
    pull->owner = call->owner;
    for (auto& p : SplitPull(std::move(pull), part_bytes)) parts.push_back(std::move(p));
  }
  return parts;
}

void RequestBuilder::AddDensePullBlocks(std::span<const BlockRef> blocks, LinkCall* call) const {
  for (const auto& r : blocks) {
    const DenseParamInfo& d = dense_[r.param];
    *call->req.add_pull() =
        DenseSegment(d.name, r.block, d.layout.length(r.block), job_.wire.For(d.name).dtype());
    call->reply.push_back(
        {d.values + d.layout.begin(r.block), static_cast<size_t>(d.layout.length(r.block)) * sizeof(float)});
  }
}

std::vector<RequestBuilder::BlockRef> RequestBuilder::DenseBlocksOf(int p) const {
  std::vector<BlockRef> out;
  for (size_t i = 0; i < dense_.size(); ++i) {
    for (int64_t b : dense_[i].blocks_of[p]) out.push_back({i, b});
  }
  return out;
}

Status RequestBuilder::AddSparsePull(const std::string& table, std::span<const uint64_t> keys, float* out,
                                     std::vector<std::unique_ptr<LinkCall>>* calls) const {
  auto it = sparse_index_.find(table);
  if (it == sparse_index_.end()) return Status::InvalidArgument("pull: unknown sparse table '" + table + "'");
  const SparseTableInfo& t = sparse_[it->second];
  const size_t dim = static_cast<size_t>(t.dim);
  const int n = slots_.pservers();
  auto unique = std::make_unique<std::vector<std::vector<uint64_t>>>(n);
  // For each requested position: (pserver, row index in that pserver's reply).
  auto where = std::make_shared<std::vector<std::pair<int, size_t>>>(keys.size());
  std::vector<absl::flat_hash_map<uint64_t, size_t>> seen(n);
  for (int p = 0; p < n; ++p) {
    seen[p].reserve(keys.size() / n + 16);
    (*unique)[p].reserve(keys.size() / n + 16);
  }
  const uint64_t table_hash = TableSlotHash(table);
  for (size_t i = 0; i < keys.size(); ++i) {
    int p = slots_.PserverOf(SlotOfKey(table_hash, keys[i], slots_.slots()));
    auto [pos, inserted] = seen[p].try_emplace(keys[i], (*unique)[p].size());
    if (inserted) (*unique)[p].push_back(keys[i]);
    (*where)[i] = {p, pos->second};
  }
  // Each pserver's rows land in its call's recv_scratch; when that call completes its `after`
  // copies them to their positions in `out` (positions are disjoint between pservers, and a
  // call's scratch lives only as long as the call).
  for (int p = 0; p < n; ++p) {
    if ((*unique)[p].empty()) continue;
    LinkCall& c = *(*calls)[p];
    wire::Segment* seg = c.req.add_pull();
    seg->set_param(table);
    seg->set_block(-1);
    seg->set_count(static_cast<int64_t>((*unique)[p].size()));
    seg->set_dtype(job_.wire.For(table).dtype());
    seg->mutable_keys()->Add((*unique)[p].begin(), (*unique)[p].end());
    c.recv_scratch.resize((*unique)[p].size() * dim);
    c.reply.push_back({c.recv_scratch.data(), c.recv_scratch.size() * sizeof(float)});
    LinkCall* self = &c;
    c.after = [self, p, where, out, dim] {
      const float* rows = self->recv_scratch.data();
      for (size_t i = 0; i < where->size(); ++i) {
        if ((*where)[i].first != p) continue;
        const float* row = rows + (*where)[i].second * dim;
        std::copy(row, row + dim, out + i * dim);
      }
    };
  }
  return Status::OK();
}

void RequestBuilder::BuildInit(int p, LinkCall* call) const {
  call->req.set_op(wire::DataRequest::INIT);
  for (const auto& d : dense_) {
    wire::ParamSpec* s = call->req.add_params();
    s->set_name(d.name);
    s->set_sparse(false);
    s->set_size(static_cast<int64_t>(d.size));
    *s->mutable_optimizer() = ToWire(d.optimizer);
    for (int64_t b : d.blocks_of[p]) {
      *call->req.add_push() = DenseSegment(d.name, b, d.layout.length(b));
      call->payload.push_back(
          {d.values + d.layout.begin(b), static_cast<size_t>(d.layout.length(b)) * sizeof(float)});
    }
  }
  for (const auto& t : sparse_) {
    wire::ParamSpec* s = call->req.add_params();
    s->set_name(t.name);
    s->set_sparse(true);
    s->set_dim(t.dim);
    *s->mutable_optimizer() = ToWire(t.optimizer);
    *s->mutable_init() = ToWire(t.init);
    *s->mutable_limits() = ToWire(t.limits);
  }
}

}  // namespace tessera
