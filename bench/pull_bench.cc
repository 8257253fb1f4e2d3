// pull_bench: pulls served by one pserver's service in this process (no transport), from 1 and 2
// threads at once, alone and beside a thread pushing (async, SGD): GB/s of parameters copied into
// pull replies, all threads together, and pushed. Shows what copying a pull's dense blocks after the
// service's lock (pserver/deferred_copies.h) buys: before, every pull took the lock for its whole
// copy, so pulls took turns. Prints a Markdown table; see bench/README.md.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "job/wire_convert.h"
#include "pserver/pserver_service.h"
#include "tessera/data.pb.h"

namespace tessera::bench {
namespace {

// Answers into memory of its own, reused for every reply of one thread.
class Sink : public Responder {
 public:
  explicit Sink(std::vector<float>* buf) : buf_(buf) {}
  MutableBuffer Allocate(size_t bytes) override {
    buf_->resize(bytes / sizeof(float));
    return {buf_->data(), bytes};
  }
  void Send(std::string_view header, std::span<const ConstBuffer>) override { ok_ = header.size() > 0; }

 private:
  std::vector<float>* buf_;
  bool ok_ = false;
};

class Bench {
 public:
  Bench(int64_t floats, int64_t block) : floats_(floats), block_(block) {
    PserverServiceOptions o;
    o.index = 0;
    o.epoch = 1;
    o.job.pservers = 1;
    o.job.token = "tok";
    o.job.block_size = block;
    o.job.mode.kind = ConsistencyMode::Kind::kAsync;
    o.job.optimizer = *OptimizerConfig::Parse("sgd:lr=0.001");
    o.slots = SlotMap::RoundRobin(o.job.slots, 1);
    service_ = std::make_unique<PserverService>(o);
    auto init = Request(wire::DataRequest::INIT, "a");
    auto* spec = init.add_params();
    spec->set_name("w");
    spec->set_size(floats);
    *spec->mutable_optimizer() = ToWire(*OptimizerConfig::Parse("sgd:lr=0.001"));
    Blocks(init.mutable_push());
    std::vector<float> values(floats, 0.5f), out;
    Call(init, values, &out);
    Call(Request(wire::DataRequest::INIT_DONE, "a"), {}, &out);
    for (const char* t : {"a", "b", "c"}) Call(Request(wire::DataRequest::JOIN, t), {}, &out);
  }

  // GB/s of parameters pulled (all pullers) and pushed, with `pullers` threads pulling and, with
  // `push`, one pushing.
  std::pair<double, double> Run(int pullers, bool push, double seconds) {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> pulled{0}, pushed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < pullers; ++t) {
      threads.emplace_back([&, t] {
        std::vector<float> out;
        auto r = Request(wire::DataRequest::DATA, t == 0 ? "b" : "c");
        Blocks(r.mutable_pull());
        for (int i = 0; i < 1000000 && !stop; ++i) {
          Call(r, {}, &out);
          pulled += floats_;
        }
      });
    }
    if (push) {
      threads.emplace_back([&] {
        std::vector<float> grad(floats_, 0.001f), out;
        auto r = Request(wire::DataRequest::DATA, "a");
        r.set_is_push(true);
        r.set_samples(1);
        Blocks(r.mutable_push());
        for (int i = 0; i < 1000000 && !stop; ++i) {
          r.set_step(i);
          Call(r, grad, &out);
          pushed += floats_;
        }
      });
    }
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the measuring time
    stop = true;
    for (auto& t : threads) t.join();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto rate = [&](int64_t floats) { return static_cast<double>(floats) * sizeof(float) / took / 1e9; };
    return {rate(pulled.load()), rate(pushed.load())};
  }

 private:
  wire::DataRequest Request(wire::DataRequest::Op op, const std::string& trainer) const {
    wire::DataRequest r;
    r.set_op(op);
    r.set_job_token("tok");
    r.set_pserver_index(0);
    r.set_pserver_epoch(1);
    r.set_trainer(trainer);
    r.set_trainer_epoch(trainer == "a" ? 11 : trainer == "b" ? 12 : 13);
    return r;
  }
  void Blocks(google::protobuf::RepeatedPtrField<wire::Segment>* out) const {
    for (int64_t b = 0; b * block_ < floats_; ++b) {
      auto* s = out->Add();
      s->set_param("w");
      s->set_block(b);
      s->set_count(std::min(block_, floats_ - b * block_));
    }
  }
  void Call(const wire::DataRequest& r, const std::vector<float>& payload, std::vector<float>* out) {
    std::string h = r.SerializeAsString();
    service_->Handle(h, ConstBuffer{payload.data(), payload.size() * sizeof(float)},
                     std::make_unique<Sink>(out));
  }

  const int64_t floats_, block_;
  std::unique_ptr<PserverService> service_;
};

int Run(int mib, double seconds) {
  const int64_t floats = static_cast<int64_t>(mib) << 18;
  Bench b(floats, 1 << 16);
  std::printf(
      "| shard | pulling threads | a thread pushing | pulled GB/s (all threads) | pushed GB/s |\n"
      "|---|---|---|---|---|\n");
  for (bool push : {false, true}) {
    for (int pullers : {1, 2}) {
      auto [pulled, pushed] = b.Run(pullers, push, seconds);
      std::printf("| %d MiB | %d | %s | %.2f | %s |\n", mib, pullers, push ? "yes" : "no", pulled,
                  push ? std::to_string(pushed).substr(0, 5).c_str() : "-");
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"Tessera pulls served from several threads at once"};
  int mib = 16;
  double seconds = 2;
  app.add_option("--mib", mib, "size of the dense parameter in MiB")->capture_default_str();
  app.add_option("--seconds", seconds, "measuring time per figure")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::Run(mib, seconds);
}
