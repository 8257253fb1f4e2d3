// The trainer-side client of Tessera's parameter servers.
//
// A Client registers the trainer in etcd (with a lease), finds the pservers and follows them as
// they move, and moves parameters: dense tensors that live in the caller's own buffers, and
// sparse tables of rows keyed by uint64. Every operation sends one batched request per pserver,
// issued concurrently (one worker thread per pserver), and returns a Handle to wait on, so
// computation can overlap communication.
//
// Typical sync-mode loop:
//   auto client = Client::Connect(options);             // registers the trainer
//   client->AddDense("w", w.data(), w.size());          // binds the caller's buffer
//   client->Initialize();                               // one trainer initializes, all join
//   client->Pull().Wait();                              // w now holds the current values
//   for (each batch) {
//     ... compute gradient sum g over n samples ...
//     Gradients grads; grads.Dense("w", g); grads.samples = n;
//     client->PushPull(grads).Wait();                  // w holds the next version
//   }
//
// Failures: transport errors and pservers that restart (also at the same address) are retried
// with backoff until `request_timeout`; a restarted pserver without state is re-initialized from
// this trainer's current values. Retried pushes are applied once (tagged with trainer and step).
// Errors that retrying cannot fix (unknown parameter, wrong size) come back from Wait() with a
// message that names the parameter, and nothing is sent.
//
// Non-finite gradients: before sending, a push is scanned for NaN and infinity. One that holds any
// is not sent; the step goes on without this trainer's gradient on every pserver (an empty push),
// so all pservers stay at the same version. (PushPullAndWait in a sync or ssp job with one
// pserver leaves the scan to that pserver, which drops such a push whole as the trainer would
// have: the same outcome, one scan of the gradient fewer a step.) What Wait() then says follows
// the job's policy (`tessera job create --nonfinite`): "skip" (the default) returns OK with Handle::skipped()
// set (and an error after 10 such steps in a row: the model has diverged), "error" returns InvalidArgument
// naming the parameter and element. ClientOptions::allow_nonfinite skips this trainer's scan; the pservers
// still refuse a non-finite gradient (each refusal counts as an empty push there, so the step still closes
// everywhere).
//
// Thread-safety: Client methods may be called from one thread at a time (a trainer's loop);
// Handles may be waited on from any thread. Buffers passed to an operation must stay valid and
// untouched until its Handle completes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/connection.h"
#include "tessera/params.h"
#include "tessera/status.h"

namespace tessera {

struct ClientOptions {
  ConnectionOptions connection;  // etcd, the job and its secret; required
  std::string trainer_id;        // empty: the lowest free number ("0", "1", ...)
  int64_t lease_ttl_seconds = 10;
  // How long one operation keeps retrying (and a sync pull may wait for slower trainers).
  std::chrono::milliseconds request_timeout{std::chrono::minutes(5)};
  // Connect() fails after this long if no etcd endpoint accepts connections at all, saying why
  // (host unknown, connection refused); once connected, outages are retried (request_timeout).
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(2)};
  bool allow_nonfinite = false;  // skip this trainer's scan for NaN/Inf (the pservers still refuse them)
  // Data-plane transport to the pservers: "auto" (shared memory with a pserver on the same
  // host, TCP otherwise), "shm", "tcp" or "grpc". A transport a pserver does not serve fails the
  // operation with FailedPrecondition saying what it serves.
  std::string transport = "auto";
  // Up to two requests in flight per pserver, each on a connection of its own: a pull, or an
  // async push, of more than 8 MiB to one pserver goes as parts of about 4 MiB, two at a time, so
  // one travels while the pserver works on the other (docs/protocol.md). false: one request at a
  // time per pserver, each whole (an async push then applies whole on each pserver).
  bool pipeline = true;
  // tcp, shm: how long a call waiting for its reply checks for it without sleeping before it
  // sleeps (busy polling). It saves a wake-up per reply (50 us and more where idle cores halt, as
  // a VM's do) and keeps a core busy meanwhile: for a trainer with a core of its own. Launchers
  // set it through TESSERA_BUSY_POLL_US (the Session reads it). Zero: sleep at once.
  std::chrono::microseconds busy_poll{0};
};

// Completion of an asynchronous operation.
class Handle {
 public:
  Handle() = default;
  // Blocks until the operation is done on every pserver; returns the first error.
  Status Wait() const;
  bool done() const;
  // After Wait(): the lowest version / slowest-trainer clock reported by the pservers.
  int64_t version() const;
  int64_t min_clock() const;
  // A push whose gradient was dropped (it held NaN or infinity): the step went on without it.
  bool skipped() const;

  struct State;
  explicit Handle(std::shared_ptr<State> s) : state_(std::move(s)) {}

 private:
  std::shared_ptr<State> state_;
};

// The gradients of one step: dense gradient sums for whole parameters and sparse gradient sums
// for rows, computed over `samples` samples (the pservers divide by the total).
struct Gradients {
  struct DenseGrad {
    std::string name;
    std::span<const float> grad;  // same length as the parameter (or the range, see DenseRange)
    int64_t offset = 0;           // a range: the parameter's elements [offset, offset + grad.size())
  };
  struct SparseGrad {
    std::string table;
    std::span<const uint64_t> keys;  // duplicates are summed
    std::span<const float> grads;    // keys.size() * dim
  };
  std::vector<DenseGrad> dense;
  std::vector<SparseGrad> sparse;
  int64_t samples = 0;

  void Dense(std::string name, std::span<const float> g) { dense.push_back({std::move(name), g}); }
  // Part of a parameter's gradient, for Client::PushPiece: elements [offset, offset + g.size()),
  // which start at a multiple of Client::block_size() and end at one or at the parameter's end.
  void DenseRange(std::string name, int64_t offset, std::span<const float> g) {
    dense.push_back({std::move(name), g, offset});
  }
  void Sparse(std::string table, std::span<const uint64_t> keys, std::span<const float> g) {
    sparse.push_back({std::move(table), keys, g});
  }
};

// What went in place in this process's dense memory (Client::DenseMemory) over shared memory:
// requests the pservers read there, replies they wrote there, renewals after failed calls.
struct InPlaceCounts {
  uint64_t requests = 0;
  uint64_t replies = 0;
  uint64_t renewals = 0;
};
InPlaceCounts InPlaceCountsNow();

class Client {
 public:
  // Connects to etcd, reads the job and registers this trainer. Fails with NotFound if the job
  // does not exist.
  static StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  virtual ~Client() = default;

  // Declares a dense parameter whose values live in `values[0..size)` (initial values are taken
  // from there by the initializing trainer; pulls write there). `optimizer` null: the job's.
  virtual Status AddDense(const std::string& name, float* values, size_t size,
                          const OptimizerConfig* optimizer = nullptr) = 0;
  // Memory for a model's dense values and gradients: `floats` zeroed floats, page-aligned, valid
  // until the client is destroyed. Once per client, before Initialize(). With a pserver on this
  // host over shared memory, a PushPullAndWait whose gradients lie back to back in it, and whose
  // parameters do too (in the order they were declared), is read and answered there by the
  // pserver in place: a copy each way saved. Anywhere else it is ordinary memory.
  virtual StatusOr<std::span<float>> DenseMemory(size_t floats) = 0;
  // Declares a sparse table of rows of `dim` floats created on first touch by `init`.
  // `limits` null: none (every id pushed or pulled gets a row, kept for good).
  virtual Status AddSparse(const std::string& name, int dim, const InitializerConfig& init,
                           const OptimizerConfig* optimizer = nullptr,
                           const TableLimits* limits = nullptr) = 0;

  // Makes sure every pserver holds the declared parameters: one trainer (the winner of an etcd
  // lock) initializes them from its values, the others wait for every pserver to report itself
  // initialized. Then joins every pserver's consistency group and sets step().
  virtual Status Initialize() = 0;

  // Pulls every dense parameter into its buffer (sync: the current step's version).
  virtual Handle Pull() = 0;
  // Pushes this step's gradients; the step then advances.
  virtual Handle Push(const Gradients& grads) = 0;
  // Pushes this step's gradients and pulls the dense parameters of the next version.
  virtual Handle PushPull(const Gradients& grads) = 0;
  // As PushPull, for a caller that waits for it at once: returns when it is done (the Handle's
  // Wait() then says how it went, at once). The request to the first pserver goes out from the
  // calling thread, with no link thread woken for it: a step saves a hand-over between threads.
  // With one pserver (sync or ssp), that pserver scans the gradient for NaN and infinity instead
  // of this trainer (see "Non-finite gradients" above).
  virtual Handle PushPullAndWait(const Gradients& grads) {
    Handle h = PushPull(grads);
    (void)h.Wait();
    return h;
  }
  // Pushes this step's gradients in pieces, as backward produces them, so they travel (and are
  // applied) while the rest is computed: call it for each piece, `last` on the step's last one;
  // every piece carries the step's sample count. The step advances after the last piece.
  // With `pull`, the piece's dense blocks are pulled back at the next version, and its Handle
  // completes once they are in the buffers: at once when every trainer's gradient for them is in
  // (the pservers apply such blocks before the step's barrier), else with the last piece, whose
  // Handle completes when every dense parameter holds the next version. So the next forward pass
  // may wait for each piece's Handle just before it uses that piece's parameters.
  // A piece's gradient buffers must stay untouched until its Handle completes. Sync jobs send the
  // pieces as they come; async and ssp jobs, replicated or elastic shards and backup trainers
  // take one push per step, so there the pieces are gathered (copied) and sent with the last.
  // A piece holding NaN or infinity drops the rest of the step's push (the job's policy says
  // what Wait() returns); blocks already applied keep this trainer's earlier pieces.
  virtual Handle PushPiece(const Gradients& piece, bool last, bool pull) = 0;
  // Elements per dense block: the unit of a range in a piece (Gradients::DenseRange).
  virtual int64_t block_size() const = 0;

  // Pulls rows of a sparse table for `keys` into out[keys.size() * dim].
  virtual Handle SparsePull(const std::string& table, std::span<const uint64_t> keys, float* out) = 0;

  // The row width of a declared sparse table; NotFound for an undeclared one.
  virtual StatusOr<int> SparseDim(const std::string& table) const = 0;

  // The step the next push belongs to.
  virtual int64_t step() const = 0;
  virtual const std::string& trainer_id() const = 0;
  virtual int num_pservers() const = 0;
  virtual ConsistencyMode mode() const = 0;
  // Waits until at least `n` trainers are registered in the job (or `timeout` passes).
  virtual Status WaitForTrainers(int n, std::chrono::milliseconds timeout) = 0;
  // Deregisters the trainer (every pserver then drops it from its group); the destructor does it too.
  virtual Status Close() = 0;
};

}  // namespace tessera
