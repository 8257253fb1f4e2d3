// RequestBuilder: turns declared parameters and a step's gradients into one request per
// pserver: header segments, a gather list pointing into the caller's gradient buffers, and a
// scatter list pointing into the caller's parameter buffers for the reply. Sparse keys are
// de-duplicated (gradients of a repeated key are summed) and grouped by pserver. Pure: no I/O;
// thread-compatible.
#pragma once

#include <atomic>
#include <compare>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "job/job_config.h"
#include "job/placement.h"
#include "job/slot_map.h"
#include "tessera/client.h"
#include "tessera/data.pb.h"
#include "transport/transport.h"

namespace tessera {

struct DenseParamInfo {
  std::string name;
  float* values = nullptr;
  size_t size = 0;
  OptimizerConfig optimizer;
  BlockLayout layout;
  std::vector<std::vector<int64_t>> blocks_of;  // per pserver: the blocks it holds
};

struct SparseTableInfo {
  std::string name;
  int dim = 0;
  InitializerConfig init;
  OptimizerConfig optimizer;
  TableLimits limits;
};

class NarrowedPush;  // client/wire_coder.h

// One request to one pserver, with the buffers it gathers from and scatters into.
struct LinkCall {
  wire::DataRequest req;
  std::vector<ConstBuffer> payload;
  std::vector<MutableBuffer> reply;
  std::vector<float> send_scratch;  // sparse gradient rows gathered for this pserver
  std::vector<float> recv_scratch;  // sparse rows pulled, before they are scattered
  std::function<void()> after;      // runs after a successful reply
  // Run by the link: `before` just before the call is first sent (after every call queued before
  // it on the link finished), `after_reply` with a successful reply.
  std::function<void(LinkCall&)> before;
  std::function<void(const wire::DataReply&)> after_reply;
  // Run by the client once the call has finished, well or not (before its Handle hears of it).
  std::function<void()> on_end;
  std::shared_ptr<const void> owner;  // what `payload` points into, when the call must keep it
  // A job's wire format (WireCoder): the push as it goes out, encoded once (a retry sends the
  // same bytes), and the most bytes the pull's reply may take as it comes back (into the link's
  // buffer), before it is widened into `reply`.
  bool wire_encoded = false;
  std::string wire_payload;
  std::shared_ptr<NarrowedPush> wire_stream;  // instead of wire_payload: made as it is sent
  size_t wire_reply_bytes = 0;
};

class RequestBuilder {
 public:
  RequestBuilder(const JobConfig& job, const SlotMap& slots);

  Status AddDense(const std::string& name, float* values, size_t size, const OptimizerConfig& opt);
  Status AddSparse(const std::string& name, int dim, const InitializerConfig& init,
                   const OptimizerConfig& opt, const TableLimits& limits = {});
  const std::vector<DenseParamInfo>& dense() const { return dense_; }
  const std::vector<SparseTableInfo>& sparse() const { return sparse_; }

  // Adds this step's push (dense blocks and sparse rows for pserver p) to calls[p]. Checks names
  // and sizes first: InvalidArgument names the parameter. With `ranges`, a dense gradient may
  // cover whole blocks of its parameter (Gradients::DenseRange); `pushed` (if given) gets, per
  // pserver, the dense blocks added.
  struct BlockRef {
    size_t param = 0;  // index in dense()
    int64_t block = 0;
    auto operator<=>(const BlockRef&) const = default;
  };
  Status AddPush(const Gradients& grads, std::vector<std::unique_ptr<LinkCall>>* calls, bool ranges = false,
                 std::vector<std::vector<BlockRef>>* pushed = nullptr) const;
  // AddPush's checks alone (names, sizes, ranges, the sample count).
  Status CheckPush(const Gradients& grads, bool ranges) const;
  // Adds a pull of `blocks` (dense blocks pserver `call` holds) into their value buffers.
  void AddDensePullBlocks(std::span<const BlockRef> blocks, LinkCall* call) const;
  // Every dense block pserver p holds.
  std::vector<BlockRef> DenseBlocksOf(int p) const;
  // Where the first NaN or infinity among the gradients is ("'w' element 17", "'emb' row of key
  // 42"), or "" when every value is finite. A scan at about the speed of reading the memory.
  std::string FindNonFinite(const Gradients& grads) const;
  // Makes every call an empty push for the step, standing for a gradient this trainer dropped
  // (`why`): the step goes on without it on every pserver.
  void AddSkippedPush(const std::string& why, std::vector<std::unique_ptr<LinkCall>>* calls) const;
  // Adds pulls of every dense parameter's blocks into their value buffers.
  void AddDensePull(std::vector<std::unique_ptr<LinkCall>>* calls) const;
  // Cuts a pull of dense blocks (a call with pull segments only) into calls of about
  // `part_bytes` of values each, whole segments, in order; one call (itself) when it is smaller
  // than two parts. Each part pulls its segments into their own buffers.
  static std::vector<std::unique_ptr<LinkCall>> SplitPull(std::unique_ptr<LinkCall> call, size_t part_bytes);
  // The same for a push of dense blocks (each from its own payload buffer): the parts are the
  // push's pieces 0, 1, ... (piece, more_pieces), for an async job. A pull of dense blocks in the
  // same call follows them as plain pulls (SplitPull), to be sent once every piece is done.
  static std::vector<std::unique_ptr<LinkCall>> SplitPush(std::unique_ptr<LinkCall> call, size_t part_bytes);
  // Adds a pull of `keys` of `table` into out[keys.size() * dim]; the rows are scattered into
  // `out` by each call's `after`.
  Status AddSparsePull(const std::string& table, std::span<const uint64_t> keys, float* out,
                       std::vector<std::unique_ptr<LinkCall>>* calls) const;
  // An INIT request for pserver p: every declaration, and the dense blocks p holds.
  void BuildInit(int p, LinkCall* call) const;

  int pservers() const { return slots_.pservers(); }

 private:
  JobConfig job_;
  SlotMap slots_;
  std::vector<DenseParamInfo> dense_;
  std::vector<SparseTableInfo> sparse_;
  std::unordered_map<std::string, size_t> dense_index_, sparse_index_;
};

}  // namespace tessera
