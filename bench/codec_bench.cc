// codec_bench: the wire formats' per-block costs (job/wire_codec.h) and the pserver's change
// stamps (pserver/change_stamps.h) on one block of a dense parameter, as a step pays them: the
// trainer's encoders with error feedback, the pserver's decoder, the narrowing of a reply, and
// the stamping of an apply. Google Benchmark; `--benchmark_filter=Signs` and the like pick some.
// Figures in bench/README.md ("Gradients compressed on the wire").
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "job/wire_codec.h"
#include "pserver/change_stamps.h"

namespace tessera::bench {
namespace {

std::vector<float> Gradient(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.01f);
  std::vector<float> g(n);
  for (float& x : g) x = d(rng);
  return g;
}

// The trainer's sign encoder: the residual added in, the mean magnitude, the bits.
void BM_EncodeSigns(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto g = Gradient(n, 1);
  std::vector<float> residual(n, 0.0f);
  std::string out;
  for (auto _ : state) {
    out.clear();
    EncodeSigns(g.data(), residual.data(), n, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_EncodeSigns)->Arg(64 << 10)->Arg(200704);

// The pserver's decoder of a sign push.
void BM_DecodeSigns(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto g = Gradient(n, 2);
  std::vector<float> residual(n, 0.0f), decoded(n);
  std::string bytes;
  EncodeSigns(g.data(), residual.data(), n, &bytes);
  wire::Segment s;
  s.set_coding(wire::SIGNS);
  for (auto _ : state) {
    if (!DecodeSegment(s, bytes.data(), n, decoded.data()).ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(decoded.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_DecodeSigns)->Arg(64 << 10);

// The trainer's top-k encoder at 1 %.
void BM_EncodeTopK(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto g = Gradient(n, 3);
  std::vector<float> residual(n, 0.0f);
  std::string out;
  const size_t k = TopKCount(0.01, n);
  for (auto _ : state) {
    out.clear();
    benchmark::DoNotOptimize(EncodeTopK(g.data(), residual.data(), n, k, wire::FLOAT32, &out));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_EncodeTopK)->Arg(64 << 10);

// A reply's values narrowed to bfloat16.
void BM_NarrowBfloat16(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto v = Gradient(n, 4);
  std::vector<uint16_t> out(n);
  for (auto _ : state) {
    NarrowValues(v, wire::BFLOAT16, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_NarrowBfloat16)->Arg(64 << 10)->Arg(13 << 20);

// A reply's values widened from bfloat16 on the trainer: a block, and a whole shard of the 26 M
// model (13 M values, beyond the caches).
void BM_WidenBfloat16(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<uint16_t> in(n);
  NarrowValues(Gradient(n, 5), wire::BFLOAT16, in.data());
  std::vector<float> out(n);
  for (auto _ : state) {
    WidenValues(in.data(), n, wire::BFLOAT16, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_WidenBfloat16)->Arg(64 << 10)->Arg(13 << 20);

// An apply's stamps: every element touched (a sign push), or one in a hundred (a top-k push).
void BM_StampsApplied(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const int every = static_cast<int>(state.range(1));
  std::vector<float> g(n, 0.0f);
  for (size_t i = 0; i < n; i += static_cast<size_t>(every)) g[i] = 1.0f;
  ChangeStamps stamps(7);
  const std::string param = "w1";
  for (auto _ : state) {
    stamps.BeginApply();
    stamps.Applied(param, 0, g.data(), n);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_StampsApplied)->Args({64 << 10, 1})->Args({64 << 10, 100});

}  // namespace
}  // namespace tessera::bench

BENCHMARK_MAIN();
