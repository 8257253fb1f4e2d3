// apply_bench: server-side optimizer apply over a 256 MiB dense shard (SGD, momentum, Adagrad,
// Adam, through the pserver's own kernel ApplyUpdate), beside a plain `w -= lr*g` loop over the
// same arrays measured in the same run. GB/s of parameters updated (256 MiB / time). Prints a
// Markdown table; see bench/README.md.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/finite.h"
#include "pserver/optimizer.h"

namespace tessera::bench {
namespace {

// Memory the kernels run over: aligned, touched once before timing (no page faults timed).
struct Arrays {
  explicit Arrays(size_t n) : n(n) {
    for (float** p : {&w, &g, &s1, &s2}) {
      *p = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
      if (!*p) std::abort();
    }
    for (size_t i = 0; i < n; ++i) {
      w[i] = 0.5f;
      g[i] = 0.001f * static_cast<float>(i % 17);
      s1[i] = 0.1f;
      s2[i] = 0.01f;
    }
  }
  ~Arrays() {
    for (float* p : {w, g, s1, s2}) std::free(p);
  }
  size_t n;
  float *w, *g, *s1, *s2;
};

// The baseline: what any server must at least do per parameter.
__attribute__((noinline)) void PlainSgd(float* __restrict w, const float* __restrict g, float lr, size_t n) {
  for (size_t i = 0; i < n; ++i) w[i] -= lr * g[i];
}

template <typename Fn>
double BestSeconds(Fn fn, int reps) {
  double best = 1e9;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

int Run(int mib, int reps) {
  const size_t n = (static_cast<size_t>(mib) << 20) / sizeof(float);
  Arrays a(n);
  const double bytes = static_cast<double>(n) * sizeof(float);
  double plain = BestSeconds([&] { PlainSgd(a.w, a.g, 1e-4f, n); }, reps);
  std::printf("dense shard: %d MiB (%zu floats), best of %d runs\n\n", mib, n, reps);
  std::printf("| update | GB/s of parameters | vs plain `w -= lr*g` |\n|---|---|---|\n");
  std::printf("| plain `w -= lr*g` loop | %.2f | 100%% |\n", bytes / plain / 1e9);
  struct Case {
    const char* name;
    const char* spec;
  };
  const Case cases[] = {{"sgd", "sgd:lr=0.0001"},
                        {"sgd + weight decay", "sgd:lr=0.0001,weight_decay=0.0001"},
                        {"momentum", "momentum:lr=0.0001,momentum=0.9"},
                        {"momentum (nesterov)", "momentum:lr=0.0001,momentum=0.9,nesterov=1"},
                        {"adagrad", "adagrad:lr=0.01"},
                        {"adam", "adam:lr=0.001"}};
  for (const auto& c : cases) {
    auto opt = OptimizerConfig::Parse(c.spec);
    if (!opt.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.spec, opt.status().ToString().c_str());
      return 1;
    }
    int64_t t = 1;
    double s = BestSeconds([&] { ApplyUpdate(*opt, a.w, a.g, 1.0f, n, a.s1, a.s2, t++); }, reps);
    std::printf("| %s | %.2f | %.0f%% |\n", c.name, bytes / s / 1e9, 100.0 * plain / s);
    std::fflush(stdout);
  }
  // The scan for NaN and infinity every push goes through before anything is applied.
  int64_t found = 0;
  double scan = BestSeconds([&] { found += FirstNonFinite(a.g, n); }, reps);
  std::printf("| non-finite scan of the gradient (reads only) | %.2f | %.0f%% |\n", bytes / scan / 1e9, 100.0 * plain / scan);
  // Keep the results observable.
  double sum = 0;
  for (size_t i = 0; i < n; i += 4096) sum += a.w[i];
  std::fprintf(stderr, "(checksum %g, %lld)\n", sum, static_cast<long long>(found));
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"Tessera server-side optimizer apply benchmark"};
  int mib = 256, reps = 5;
  app.add_option("--mib", mib, "size of the dense shard in MiB")->capture_default_str();
  app.add_option("--reps", reps, "runs per figure (the best is reported)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::Run(mib, reps);
}
