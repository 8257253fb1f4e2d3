// InProcessClient: a Client that applies updates in place, in this process, with the optimizer
// kernel the pservers run: the "without Tessera" baseline of mlp_bench and step_timeline.
// Dense parameters only. Bench-only.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/handle_state.h"
#include "pserver/optimizer.h"
#include "tessera/client.h"

namespace tessera::bench {

class InProcessClient : public Client {
 public:
  explicit InProcessClient(OptimizerConfig opt) : opt_(opt) {}
  Status AddDense(const std::string& name, float* values, size_t size, const OptimizerConfig*) override {
    Param p{name, values, size, std::vector<float>(size), std::vector<float>(size)};
    InitState(opt_, p.s1.data(), p.s2.data(), size);
    params_.push_back(std::move(p));
    return Status::OK();
  }
  // Page-aligned as the real client's, so the model's arithmetic runs on the same alignment.
  StatusOr<std::span<float>> DenseMemory(size_t floats) override {
    const size_t bytes = (floats * sizeof(float) + 4095) / 4096 * 4096;
    memory_.reset(static_cast<float*>(std::aligned_alloc(4096, bytes)));
    std::memset(memory_.get(), 0, bytes);
    return std::span<float>(memory_.get(), floats);
  }
  Status AddSparse(const std::string&, int, const InitializerConfig&, const OptimizerConfig*,
                   const TableLimits*) override {
    return Status::Unimplemented("the in-process baseline has no sparse tables");
  }
  Status Initialize() override { return Status::OK(); }
  Handle Pull() override { return Done(); }
  Handle Push(const Gradients& g) override { return PushPull(g); }
  Handle PushPull(const Gradients& g) override { return PushPiece(g, true, true); }
  // Each piece (or range) is applied as it comes, the step counted once.
  Handle PushPiece(const Gradients& g, bool last, bool) override {
    if (!in_step_) ++t_;
    in_step_ = !last;
    for (const auto& d : g.dense) {
      for (auto& p : params_) {
        if (p.name == d.name) {
          const size_t at = static_cast<size_t>(d.offset);
          ApplyUpdate(opt_, p.values + at, d.grad.data(), 1.0f / static_cast<float>(g.samples), d.grad.size(),
                      p.s1.data() + at, p.s2.data() + at, t_);
        }
      }
    }
    return Done();
  }
  int64_t block_size() const override { return int64_t{1} << 16; }
  Handle SparsePull(const std::string&, std::span<const uint64_t>, float*) override { return Done(); }
  StatusOr<int> SparseDim(const std::string& t) const override { return Status::NotFound(t); }
  int64_t step() const override { return t_; }
  const std::string& trainer_id() const override { return id_; }
  int num_pservers() const override { return 0; }
  ConsistencyMode mode() const override { return {}; }
  Status WaitForTrainers(int, std::chrono::milliseconds) override { return Status::OK(); }
  Status Close() override { return Status::OK(); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> memory_;
  struct Param {
    std::string name;
    float* values;
    size_t size;
    std::vector<float> s1, s2;
  };
  static Handle Done() {
    auto s = std::make_shared<Handle::State>(1);
    s->Complete(Status::OK(), 0, 0);
    return Handle(s);
  }
  OptimizerConfig opt_;
  std::vector<Param> params_;
  int64_t t_ = 0;
  bool in_step_ = false;
  std::string id_ = "0";
};

}  // namespace tessera::bench
