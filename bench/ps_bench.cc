// ps_bench: data-plane throughput for every transport (grpc, tcp, shm), beside the loopback TCP
// bandwidth (iperf3 -l 1M) and a raw TCP ping-pong measured in the same run. Starts its own
// etcd, `tessera pserver` and transport_peer processes. Prints Markdown tables; see
// bench/README.md.
//
//   transport alone: push and pull of 1, 4, 16, 64 MiB over one connection to a peer that does
//           no work, GB/s and % of iperf3; TCP also over mutual TLS ("tcp+tls"), and the share of
//           plaintext TCP's figure that TLS keeps.
//   through Tessera: push and pull of a whole model through the trainer client and a pserver
//           that applies SGD (async mode), 1 and 2 pservers; with 1, TCP in a --tls job too.
//   round trip: a 4 KiB push-then-pull, over the transport alone and through the client,
//           beside the raw ping-pong.
//   sparse: rows per second pulled and pushed (Adagrad) for dim 8 and 64, 10,000 keys per
//           request drawn from Zipf(1.1) over 1M and over 100M ids, tcp and shm, 2 pservers,
//           beside a plain in-process flat_hash_map loop over the same keys (--sparse-only).
#include <absl/container/flat_hash_map.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>

#include "bench_cluster.h"
#include "bench_tls.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/random.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "harness/etcd_server.h"
#include "harness/job_certs.h"
#include "harness/subprocess.h"
#include "harness/wait.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/slot_map.h"
#include "loopback.h"
#include "tessera/client.h"
#include "transport/stream_io.h"
#include "transport/transport_factory.h"
#include "zipf.h"

namespace tessera::bench {
namespace {

using testing::BuildPath;
using testing::EtcdServer;
using testing::SpawnOptions;
using testing::Subprocess;

// Runs `op` until at least `min_seconds` and `min_iters` have passed; returns seconds per op.
template <typename Fn>
StatusOr<double> Time(Fn op, double min_seconds, int min_iters) {
  TESSERA_RETURN_IF_ERROR(op());  // warm-up
  auto start = Now();
  int iters = 0;
  double elapsed = 0;
  while (iters < min_iters || elapsed < min_seconds) {
    TESSERA_RETURN_IF_ERROR(op());
    ++iters;
    elapsed = std::chrono::duration<double>(Now() - start).count();
  }
  return elapsed / iters;
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Now().time_since_epoch()).count();
}

// A transport_peer process and a connection to it.
struct Peer {
  std::unique_ptr<Subprocess> proc;
  std::string endpoint;
};

StatusOr<Peer> StartPeer(const std::string& dir, const std::vector<std::string>& args) {
  SpawnOptions o;
  o.argv = {BuildPath("bench/transport_peer")};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.log_path = dir + "/peer-" + std::to_string(::getpid()) + "-" + std::to_string(NowMicros()) + ".log";
  Peer p;
  TESSERA_ASSIGN_OR_RETURN(p.proc, Subprocess::Spawn(o));
  if (!p.proc->WaitForOutput("endpoint ", std::chrono::seconds(10))) {
    return Status::Unavailable("transport_peer did not start: " + p.proc->Output());
  }
  std::string out = p.proc->Output();
  auto at = out.find("endpoint ") + 9;
  p.endpoint = out.substr(at, out.find('\n', at) - at);
  return p;
}

// One raw TCP exchange against transport_peer --pingpong: `in` bytes there, `out` bytes back
// (at least one: the reply). Seconds per exchange.
StatusOr<double> RawExchange(const std::string& endpoint, size_t in, size_t out, double seconds) {
  TESSERA_ASSIGN_OR_RETURN(UniqueFd fd, ConnectTcp(endpoint, Deadline(std::chrono::seconds(5))));
  std::vector<char> buf(8 + in, 1), back(std::max<size_t>(out, 1));
  uint32_t n[2] = {static_cast<uint32_t>(in), static_cast<uint32_t>(out)};
  std::memcpy(buf.data(), n, 8);
  return Time(
      [&]() -> Status {
        iovec iov{buf.data(), buf.size()};
        TESSERA_RETURN_IF_ERROR(WriteFully(fd.get(), &iov, 1, nullptr));
        if (::recv(fd.get(), back.data(), back.size(), MSG_WAITALL) != static_cast<ssize_t>(back.size()))
          return Status::Unavailable("recv");
        return Status::OK();
      },
      seconds, in + out > (1 << 20) ? 3 : 1000);
}

struct Figures {
  double push = 0, pull = 0;  // bytes/s
};

// Push and pull of `bytes` straight over a transport connection (the peer does no work).
StatusOr<Figures> TransportFigures(ClientConnection& conn, size_t bytes, double seconds) {
  std::vector<char> out(bytes, 1), in(bytes);
  ConstBuffer ob{out.data(), bytes};
  MutableBuffer ib{in.data(), bytes};
  const std::string pull = "pull " + std::to_string(bytes);
  auto push_s = Time(
      [&] {
        return conn.Call("push", {&ob, 1}, {}, std::chrono::seconds(60)).status();
      },
      seconds, 3);
  auto pull_s = Time(
      [&] {
        return conn.Call(pull, {}, {&ib, 1}, std::chrono::seconds(60)).status();
      },
      seconds, 3);
  if (!push_s.ok()) return push_s.status();
  if (!pull_s.ok()) return pull_s.status();
  return Figures{bytes / *push_s, bytes / *pull_s};
}

const std::vector<std::string> kTransports = {"grpc", "tcp", "shm"};

// The plain in-process loop a sparse request's rows are measured against: an abseil flat map
// from key to row over a row arena, pull = find and copy, push = find or insert and Adagrad.
struct PlainTable {
  explicit PlainTable(int dim) : dim(dim) {}
  float* Row(uint64_t key) {
    auto [it, inserted] = rows.try_emplace(key, static_cast<uint32_t>(rows.size()));
    if (inserted) arena.resize(arena.size() + 2 * dim, 0.01f);  // values, accumulator
    return arena.data() + static_cast<size_t>(it->second) * 2 * dim;
  }
  int dim;
  absl::flat_hash_map<uint64_t, uint32_t> rows;
  std::vector<float> arena;
};

// Sparse rows/s through the client and 2 pservers (tcp and shm), pull and push with Adagrad,
// dim 8 and 64, 10,000 keys per request drawn from Zipf(1.1) over 1M and over 100M ids (drawn
// before timing), beside the plain in-process loop over the same keys.
Status RunSparse(Cluster& c, double seconds, bool quick) {
  std::printf(
      "\n| ids (Zipf 1.1) | dim | exchange | pull M rows/s | push+adagrad M rows/s "
      "|\n|---|---|---|---|---|\n");
  const size_t kKeys = 10000, kBatches = 64;
  for (uint64_t ids : quick ? std::vector<uint64_t>{1000000} : std::vector<uint64_t>{1000000, 100000000}) {
    const std::vector<uint64_t> all = ZipfKeys(ids, 1.1, kKeys * kBatches, 7);
    auto batch = [&](size_t i) {
      return std::span<const uint64_t>(all).subspan((i % kBatches) * kKeys, kKeys);
    };
    for (int dim : {8, 64}) {
      std::vector<float> rows(kKeys * dim), grads(kKeys * dim, 0.01f);
      auto line = [&](const std::string& what, double pull, double push) {
        std::printf("| %llu | %d | %s | %.2f | %.2f |\n", static_cast<unsigned long long>(ids), dim,
                    what.c_str(), kKeys / pull / 1e6, kKeys / push / 1e6);
        std::fflush(stdout);
      };
      {
        PlainTable t(dim);
        size_t i = 0, j = 0;
        auto pull = Time(
            [&] {
              auto keys = batch(i++);
              for (size_t k = 0; k < keys.size(); ++k) {
                const float* row = t.Row(keys[k]);
                std::copy(row, row + dim, rows.data() + k * dim);
              }
              return Status::OK();
            },
            seconds, 5);
        auto push = Time(
            [&] {
              auto keys = batch(j++);
              for (size_t k = 0; k < keys.size(); ++k) {
                float* w = t.Row(keys[k]);
                float* acc = w + dim;
                const float* g = grads.data() + k * dim;
                for (int d = 0; d < dim; ++d) {
                  acc[d] += g[d] * g[d];
                  w[d] -= 0.05f * g[d] / (std::sqrt(acc[d]) + 1e-8f);
                }
              }
              return Status::OK();
            },
            seconds, 5);
        line("in-process flat_hash_map loop", *pull, *push);
      }
      TESSERA_ASSIGN_OR_RETURN(std::string job, StartJob(c, 2, "async"));
      for (const std::string t : {"tcp", "shm"}) {
        TESSERA_ASSIGN_OR_RETURN(auto client, Connect(c, job, t));
        const OptimizerConfig adagrad = *OptimizerConfig::Parse("adagrad:lr=0.05");
        TESSERA_RETURN_IF_ERROR(
            client->AddSparse("emb", dim, *InitializerConfig::Parse("uniform:-0.01,0.01"), &adagrad));
        TESSERA_RETURN_IF_ERROR(client->Initialize());
        size_t i = 0, j = 0;
        TESSERA_ASSIGN_OR_RETURN(
            double pull,
            Time([&] { return client->SparsePull("emb", batch(i++), rows.data()).Wait(); }, seconds, 5));
        TESSERA_ASSIGN_OR_RETURN(double push, Time(
                                                  [&] {
                                                    Gradients g;
                                                    g.Sparse("emb", batch(j++), grads);
                                                    g.samples = 1;
                                                    return client->Push(g).Wait();
                                                  },
                                                  seconds, 5));
        line(t + ", 2 pservers", pull, push);
      }
      for (auto& p : c.pservers) p->Terminate(std::chrono::seconds(5));
      c.pservers.clear();
    }
  }
  return Status::OK();
}

int Run(double seconds, bool quick, bool transport_only, bool sparse_only, bool through_only,
        std::vector<int> mib_list, int apply_threads, bool pipeline, int busy_poll_us,
        std::vector<std::string> through_transports) {
  Cluster c;
  auto dir = MakeTempDir("ps-bench-");
  if (!dir.ok()) return 1;
  c.dir = *dir;
  c.apply_threads = std::to_string(apply_threads);
  c.pipeline = pipeline;
  c.busy_poll_us = busy_poll_us;
  c.tls_dir = c.dir + "/tls";
  if (::mkdir(c.tls_dir.c_str(), 0700) != 0 || !testing::WriteJobCerts(c.tls_dir, kTlsJob).ok()) {
    std::fprintf(stderr, "cannot write the TLS certificates in %s\n", c.tls_dir.c_str());
    return 1;
  }
  auto tls = LoadBenchTls(c.tls_dir);
  if (!tls.ok()) {
    std::fprintf(stderr, "%s\n", tls.status().ToString().c_str());
    return 1;
  }
  if (Status s = LaunchEtcd(c); !s.ok()) {
    std::fprintf(stderr, "etcd: %s\n", s.ToString().c_str());
    return 1;
  }
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  };
  if (sparse_only) {
    Status s = RunSparse(c, seconds, quick);
    for (auto& p : c.pservers) p->Terminate(std::chrono::seconds(5));
    (void)RemoveAll(c.dir);
    return s.ok() ? 0 : fail(s);
  }

  // Loopback throughput drifts by tens of percent from minute to minute on a small VM, so every
  // transport figure is read against an iperf3 run made just before it, and beside the same
  // exchange over a raw TCP socket between the same two processes.
  std::vector<double> iperfs;  // every iperf3 figure of the run
  auto measure_iperf = [&]() -> StatusOr<double> {
    TESSERA_ASSIGN_OR_RETURN(double r, MeasureIperf3(seconds));
    iperfs.push_back(r);
    return r;
  };
  auto raw_peer = StartPeer(c.dir, {"--pingpong"});
  if (!raw_peer.ok()) return fail(raw_peer.status());
  struct Connected {
    std::string name;
    Peer peer;
    std::unique_ptr<ClientConnection> conn;
  };
  std::vector<Connected> peers;
  for (const auto& t : kTransports) {
    auto peer = StartPeer(c.dir, {"--transport", t});
    if (!peer.ok()) return fail(peer.status());
    auto conn = NewClientConnection(*ParseTransportKind(t), peer->endpoint, TransportOptions{});
    peers.push_back({t, std::move(*peer), std::move(conn)});
  }
  {
    // TCP over mutual TLS, against plaintext TCP in the same rounds.
    auto peer = StartPeer(c.dir, {"--transport", "tcp", "--tls-dir", c.tls_dir});
    if (!peer.ok()) return fail(peer.status());
    TransportOptions to;
    to.tls = *tls;
    auto conn = NewClientConnection(TransportKind::kTcp, peer->endpoint, to);
    peers.push_back({"tcp+tls", std::move(*peer), std::move(conn)});
  }
  struct Row {
    std::string transport;
    int mib, pservers;
    double push, pull, iperf;
    double push_ratio = 0, pull_ratio = 0;  // to iperf3 (0: push / iperf, pull / iperf)
    double PushRatio() const { return push_ratio > 0 ? push_ratio : push / iperf; }
    double PullRatio() const { return pull_ratio > 0 ? pull_ratio : pull / iperf; }
    double memcpy_rate = 0;  // through a pserver: a memcpy of the model's size, just before
  };
  std::vector<Row> alone, through;
  std::vector<int> sizes_mib = quick ? std::vector<int>{1, 4} : std::vector<int>{1, 4, 16, 64};
  if (!mib_list.empty()) sizes_mib = mib_list;
  // 1. For each size and each of the raw socket (N bytes one way, one byte back) and the
  //    transports alone (a peer process whose handler does nothing): three rounds of iperf3, push,
  //    pull, back to back; each round's ratio is taken to its own iperf3, the median reported.
  constexpr int kRounds = 3;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int mib : through_only ? std::vector<int>{} : sizes_mib) {
    const size_t n = static_cast<size_t>(mib) << 20;
    for (size_t k = 0; k <= peers.size(); ++k) {
      std::vector<double> push, pull, push_ratio, pull_ratio, limits;
      for (int round = 0; round < kRounds; ++round) {
        auto limit = measure_iperf();
        if (!limit.ok()) return fail(limit.status());
        double pu, pl;
        if (k == 0) {
          auto a = RawExchange(raw_peer->endpoint, n, 0, seconds);
          auto b = RawExchange(raw_peer->endpoint, 0, n, seconds);
          if (!a.ok()) return fail(a.status());
          if (!b.ok()) return fail(b.status());
          pu = n / *a;
          pl = n / *b;
        } else {
          auto f = TransportFigures(*peers[k - 1].conn, n, seconds);
          if (!f.ok()) return fail(f.status());
          pu = f->push;
          pl = f->pull;
        }
        push.push_back(pu);
        pull.push_back(pl);
        push_ratio.push_back(pu / *limit);
        pull_ratio.push_back(pl / *limit);
        limits.push_back(*limit);
      }
      const std::string name = k == 0 ? "raw TCP socket" : peers[k - 1].name;
      alone.push_back(
          {name, mib, 1, median(push), median(pull), median(limits), median(push_ratio), median(pull_ratio)});
      std::fprintf(stderr, "%d MiB %s: push %.2f pull %.2f GB/s\n", mib, name.c_str(), median(push) / 1e9,
                   median(pull) / 1e9);
    }
  }
  // The small round trip over each transport alone, and the raw ping-pong it is held against.
  auto ping = RawExchange(raw_peer->endpoint, 4096, 4096, seconds);
  if (!ping.ok()) return fail(ping.status());
  std::map<std::string, double> rtt_transport;
  for (auto& p : peers) {
    std::vector<char> out(4096, 1), in(4096);
    ConstBuffer ob{out.data(), out.size()};
    MutableBuffer ib{in.data(), in.size()};
    auto rtt = Time(
        [&] {
          return p.conn->Call("pushpull 4096", {&ob, 1}, {&ib, 1}, std::chrono::seconds(10)).status();
        },
        seconds, 1000);
    if (!rtt.ok()) return fail(rtt.status());
    rtt_transport[p.name] = *rtt;
    p.conn.reset();
    p.peer.proc->Terminate(std::chrono::seconds(5));
  }
  // The same round trip with every frame authenticated by a job secret (both ways), as in a job.
  std::map<std::string, double> rtt_authenticated;
  const security::JobSecret secret = security::JobSecret::Generate();
  for (const auto& t : kTransports) {
    auto peer = StartPeer(c.dir, {"--transport", t, "--secret", secret.Text()});
    if (!peer.ok()) return fail(peer.status());
    TransportOptions to;
    to.secret = secret;
    auto conn = NewClientConnection(*ParseTransportKind(t), peer->endpoint, to);
    std::vector<char> out(4096, 1), in(4096);
    ConstBuffer ob{out.data(), out.size()};
    MutableBuffer ib{in.data(), in.size()};
    auto rtt = Time(
        [&] {
          return conn->Call("pushpull 4096", {&ob, 1}, {&ib, 1}, std::chrono::seconds(10)).status();
        },
        seconds, 1000);
    if (!rtt.ok()) return fail(rtt.status());
    rtt_authenticated[t] = *rtt;
    conn.reset();
    peer->proc->Terminate(std::chrono::seconds(5));
  }
  raw_peer->proc->Terminate(std::chrono::seconds(5));

  // 2. Through a real pserver (SGD applied to every push) and the trainer client.
  // Push and pull of a `mib` model through the client over each of `transports` to `job`.
  auto through_job = [&](const std::string& job, int pservers, int mib, double limit,
                         const std::vector<std::string>& transports) -> Status {
    for (const auto& t : transports) {
      TESSERA_ASSIGN_OR_RETURN(auto client, Connect(c, job, t));
      size_t n = static_cast<size_t>(mib) << 18;  // floats
      std::vector<float> w(n, 0.5f), g(n, 0.001f);
      (void)client->AddDense("w", w.data(), n);
      TESSERA_RETURN_IF_ERROR(client->Initialize());
      Gradients grads;
      grads.Dense("w", g);
      grads.samples = 1;
      // What this VM's memory does in the same minute: shared memory moves at memcpy speed at best.
      std::vector<float> copy(n);
      TESSERA_ASSIGN_OR_RETURN(double copied, Time(
                                                  [&] {
                                                    std::memcpy(copy.data(), g.data(), n * sizeof(float));
                                                    return Status::OK();
                                                  },
                                                  seconds / 4, 3));
      TESSERA_ASSIGN_OR_RETURN(double push, Time([&] { return client->Push(grads).Wait(); }, seconds, 3));
      TESSERA_ASSIGN_OR_RETURN(double pull, Time([&] { return client->Pull().Wait(); }, seconds, 3));
      double bytes = static_cast<double>(n) * 4;
      const std::string name = job == kTlsJob ? t + "+tls" : t;
      through.push_back({name, mib, pservers, bytes / push, bytes / pull, limit});
      through.back().memcpy_rate = bytes / copied;
      std::fprintf(stderr, "%s %d MiB x%d pservers: push %.2f pull %.2f GB/s\n", name.c_str(), mib, pservers,
                   bytes / push / 1e9, bytes / pull / 1e9);
    }
    return Status::OK();
  };
  for (int pservers : {1, 2}) {
    if (transport_only) break;
    for (int mib : sizes_mib) {
      if (pservers == 2 && mib < 16) continue;
      auto limit = measure_iperf();
      if (!limit.ok()) return fail(limit.status());
      auto job = StartJob(c, pservers, "async");
      if (!job.ok()) return fail(job.status());
      if (Status s = through_job(*job, pservers, mib, *limit, through_transports); !s.ok()) return fail(s);
      if (pservers == 1 && std::count(through_transports.begin(), through_transports.end(), "tcp")) {
        // TCP in a job created with --tls, right after the plaintext figures.
        auto tls_job = StartJob(c, 1, "async", true);
        if (!tls_job.ok()) return fail(tls_job.status());
        if (Status s = through_job(*tls_job, 1, mib, *limit, {"tcp"}); !s.ok()) return fail(s);
      }
    }
  }

  std::sort(iperfs.begin(), iperfs.end());
  std::printf(
      "loopback TCP (iperf3 -l 1M, 127.0.0.1) was measured %zu times in this run: %.2f to %.2f GB/s\n\n",
      iperfs.size(), iperfs.front() / 1e9, iperfs.back() / 1e9);
  std::printf(
      "Transport alone (1 connection; the far end acknowledges pushes and answers pulls from the\n"
      "memory the transport lends, doing no work of its own), beside the same exchange over a raw\n"
      "TCP socket between the same two processes (N bytes one way, one byte back). Each figure:\n"
      "%d rounds of iperf3 then push then pull; the medians, and the median of the rounds' ratios:\n\n",
      kRounds);
  std::printf(
      "| message | transport | iperf3 GB/s | push GB/s | push %% of iperf3 | pull GB/s | pull %% of iperf3 "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& r : alone) {
    std::printf("| %d MiB | %s | %.2f | %.2f | %.0f%% | %.2f | %.0f%% |\n", r.mib, r.transport.c_str(),
                r.iperf / 1e9, r.push / 1e9, 100 * r.PushRatio(), r.pull / 1e9, 100 * r.PullRatio());
  }
  // What TLS keeps of plaintext TCP, size by size (the same rounds).
  std::printf("\nTCP over mutual TLS against plaintext TCP (transport alone, same rounds):\n\n");
  std::printf(
      "| message | tcp push GB/s | tcp+tls push GB/s | TLS/plain | tcp pull GB/s | tcp+tls pull GB/s | "
      "TLS/plain |\n|---|---|---|---|---|---|---|\n");
  for (const auto& r : alone) {
    if (r.transport != "tcp") continue;
    for (const auto& t : alone) {
      if (t.transport != "tcp+tls" || t.mib != r.mib) continue;
      std::printf("| %d MiB | %.2f | %.2f | %.0f%% | %.2f | %.2f | %.0f%% |\n", r.mib, r.push / 1e9,
                  t.push / 1e9, 100 * t.push / r.push, r.pull / 1e9, t.pull / 1e9, 100 * t.pull / r.pull);
    }
  }
  if (!transport_only) {
    std::printf(
        "\nThrough Tessera (a `tessera pserver` applying SGD to every push, the trainer client;\n"
        "async mode, so no barrier is in the way):\n\n");
    std::printf(
        "| model | pservers | iperf3 GB/s | memcpy GB/s | transport | push GB/s | push %% of iperf3 | pull "
        "GB/s "
        "| pull %% of iperf3 |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& r : through) {
      std::printf("| %d MiB | %d | %.2f | %.2f | %s | %.2f | %.0f%% | %.2f | %.0f%% |\n", r.mib, r.pservers,
                  r.iperf / 1e9, r.memcpy_rate / 1e9, r.transport.c_str(), r.push / 1e9,
                  100 * r.push / r.iperf, r.pull / 1e9, 100 * r.pull / r.iperf);
    }
  }
  std::fflush(stdout);
  if (through_only) return 0;
  std::printf(
      "\nThe job's MAC on every frame (both ways), on a 4 KiB push-then-pull over the transport alone:\n\n");
  std::printf("| transport | plain (us) | authenticated (us) | cost (us) |\n|---|---|---|---|\n");
  for (const auto& [t, rtt] : rtt_transport) {
    if (!rtt_authenticated.count(t)) continue;
    std::printf("| %s | %.1f | %.1f | %+.1f |\n", t.c_str(), rtt * 1e6, rtt_authenticated[t] * 1e6,
                (rtt_authenticated[t] - rtt) * 1e6);
  }
  if (transport_only) {
    std::printf("\n4 KiB push-then-pull over the transport alone (raw TCP ping-pong: %.1f us):", *ping * 1e6);
    for (const auto& [t, rtt] : rtt_transport)
      std::printf(" %s %.1f us (%.2fx);", t.c_str(), rtt * 1e6, rtt / *ping);
    std::printf("\n");
    return 0;
  }
  // 3. Small round trips: a 4 KiB push-then-pull, beside the raw TCP ping-pong.
  std::printf("\n4 KiB push-then-pull round trip (raw TCP ping-pong of 4 KiB each way: %.1f us):\n\n",
              *ping * 1e6);
  std::printf(
      "| transport | transport alone (us) | x ping-pong | through the client and a pserver (us) | x "
      "ping-pong |\n");
  std::printf("|---|---|---|---|---|\n");
  {
    auto job = StartJob(c, 1, "async");
    if (!job.ok()) return fail(job.status());
    for (const auto& t : kTransports) {
      auto client = Connect(c, *job, t);
      if (!client.ok()) return fail(client.status());
      std::vector<float> w(1024, 0.5f), g(1024, 0.001f);
      (void)(*client)->AddDense("w", w.data(), w.size());
      if (Status s = (*client)->Initialize(); !s.ok()) return fail(s);
      Gradients grads;
      grads.Dense("w", g);
      grads.samples = 1;
      auto rtt = Time([&] { return (*client)->PushPull(grads).Wait(); }, seconds, 1000);
      if (!rtt.ok()) return fail(rtt.status());
      std::printf("| %s | %.1f | %.2f | %.1f | %.2f |\n", t.c_str(), rtt_transport[t] * 1e6,
                  rtt_transport[t] / *ping, *rtt * 1e6, *rtt / *ping);
      std::fflush(stdout);
    }
  }

  // 4. Sparse rows.
  if (Status s = RunSparse(c, seconds, quick); !s.ok()) return fail(s);
  for (auto& p : c.pservers) p->Terminate(std::chrono::seconds(5));
  (void)RemoveAll(c.dir);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"Tessera data-plane benchmark"};
  double seconds = 2.0;
  bool quick = false, transport_only = false, sparse_only = false;
  app.add_option("--seconds", seconds, "minimum measuring time per figure");
  app.add_flag("--quick", quick, "only the small models (a smoke run)");
  app.add_flag("--transport-only", transport_only, "only the transports alone and the raw baselines");
  app.add_flag("--sparse-only", sparse_only, "only the sparse rows (and their in-process baseline)");
  bool through_only = false;
  app.add_flag("--through-only", through_only,
               "only the push and pull through a pserver (and the round trips)");
  std::vector<int> mib_list;
  app.add_option("--mib", mib_list, "the model sizes in MiB (default 1 4 16 64; --quick: 1 4)")
      ->check(CLI::Range(1, 1024));
  int apply_threads = 0;
  app.add_option("--apply-threads", apply_threads,
                 "the pservers' --apply-threads (0: as shipped, the machine's)");
  std::vector<std::string> through_transports = tessera::bench::kTransports;
  app.add_option("--through-transport", through_transports, "the transports through a pserver (default: all)")
      ->check(CLI::IsMember(tessera::bench::kTransports));
  bool no_pipeline = false;
  app.add_flag("--no-pipeline", no_pipeline, "clients send one request at a time per pserver, each whole");
  int busy_poll_us = 0;
  app.add_option("--busy-poll-us", busy_poll_us,
                 "through a pserver: the pservers' and the clients' busy polling (microseconds; 0: off)")
      ->check(CLI::Range(0, 100000));
  CLI11_PARSE(app, argc, argv);
  // A logger of our own (warnings only): the trainer client's info lines would drown the tables.
  tessera::LogOptions lo;
  lo.node = "ps_bench";
  lo.level = "warn";
  (void)tessera::InitLogging(lo);
  return tessera::bench::Run(seconds, quick, transport_only, sparse_only, through_only, mib_list,
                             apply_threads, !no_pipeline, busy_poll_us, through_transports);
}
