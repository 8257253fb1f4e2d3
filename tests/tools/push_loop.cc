// push_loop: a trainer process that pushes one large dense gradient over and over, for tests
// that kill a peer in the middle of a transfer. It declares "w" (--floats values, all 1.0),
// initializes or joins, then pushes a gradient of all 1.0 (one sample) and prints
// "PUSHED <n>" after each acknowledged push, until it is killed or --pushes is reached. Test-only.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <vector>

#include "tessera/client.h"

using namespace tessera;

int main(int argc, char** argv) {
  CLI::App app{"pushes a large gradient in a loop (tests)"};
  std::string etcd, job, id, transport = "auto";
  size_t floats = size_t{8} << 20;
  int pushes = 1000000;
  bool pull = false, quiet = false;
  app.add_option("--etcd", etcd)->required();
  app.add_option("--job", job)->required();
  app.add_option("--id", id);
  app.add_option("--transport", transport);
  app.add_option("--floats", floats);
  app.add_option("--pushes", pushes);
  app.add_flag("--pull", pull, "push-then-pull (PushPull) instead of Push");
  app.add_flag("--quiet", quiet, "print only the time per push at the end");
  CLI11_PARSE(app, argc, argv);
  ClientOptions o;
  o.connection.etcd_endpoints = {etcd};
  o.connection.job = job;
  if (Status e = o.connection.FillFromEnvironment(); !e.ok()) {  // TESSERA_TLS_* and the rest
    std::printf("ERROR environment: %s\n", e.ToString().c_str());
    return 2;
  }
  o.trainer_id = id;
  o.transport = transport;
  o.lease_ttl_seconds = 3;
  o.request_timeout = std::chrono::seconds(60);
  auto client = Client::Connect(o);
  if (!client.ok()) {
    std::printf("ERROR connect: %s\n", client.status().ToString().c_str());
    return 2;
  }
  std::vector<float> w(floats, 1.0f), g(floats, 1.0f);
  Status s = (*client)->AddDense("w", w.data(), w.size());
  if (s.ok()) s = (*client)->Initialize();
  if (!s.ok()) {
    std::printf("ERROR initialize: %s\n", s.ToString().c_str());
    return 2;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  auto start = std::chrono::steady_clock::now();
  for (int i = 1; i <= pushes; ++i) {
    Gradients grads;
    grads.Dense("w", g);
    grads.samples = 1;
    s = (pull ? (*client)->PushPull(grads) : (*client)->Push(grads)).Wait();
    if (!s.ok()) {
      std::printf("ERROR push %d: %s\n", i, s.ToString().c_str());
      return 2;
    }
    if (quiet) continue;
    std::printf("PUSHED %d\n", i);
    std::fflush(stdout);
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("DONE %.1f us per %s\n", us / pushes, pull ? "push-then-pull" : "push");
  return 0;
}
