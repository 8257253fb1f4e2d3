// A job over a cluster's links: 2 trainers and 2 pservers, each on a host of its own (network
// namespaces, tests/harness/netns.h), etcd and the master on a fifth, every host's link shaped to a
// rate (tc tbf; this VM's kernel has no netem, so no added latency). For each link and model size:
// and wire format (job/wire_format.h): passes of the built-in mlp over Fashion-MNIST (its 10,000
// test images by default, or its 60,000 training images), sync; the samples a second over the
// longest trainer's training loop, against float32's on the same link in the same run, where the
// trainers' time went, and (--eval) the test accuracy after the last pass.
// Root only.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/files.h"
#include "harness/netns.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

struct Run {
  double seconds = -1;   // from the trainers' start to the last one's end (with their start and join)
  double training = -1;  // the longest trainer's loop: reading, computing, exchanging, acknowledging
  long long samples = 0;
  double compute = 0, exchange = 0;  // summed over the trainers, seconds
  double accuracy = -1;              // on fm-test after the last pass (--eval)
};

// What one run trains.
struct Setup {
  int hidden = 256;
  int64_t mbit = 0;  // every host's link (0: unshaped)
  std::string wire = "f32";
  std::string dataset = "fm-test";
  std::string optimizer = "adam:lr=0.001";
  int passes = 1;
  bool eval = false;
  bool pieces = false;  // the mlp pushes w1 in ranges as backward computes them (--model-arg pieces=1)
};

constexpr const char* kJobHosts[] = {"core", "ps0", "ps1", "tr0", "tr1"};

// One run of the mlp as `setup` says.
Run OneRun(NetLab& lab, const std::string& dir, const std::string& store, const Setup& setup, int n) {
  const int64_t mbit = setup.mbit;
  Run r;
  struct KillHosts {  // every way out: nothing of this run is left for the next
    NetLab& lab;
    ~KillHosts() {
      for (const char* h : kJobHosts) lab.KillHost(h);
    }
  } kill_hosts{lab};
  for (const char* h : kJobHosts) {
    if (mbit > 0 ? !lab.ShapeLink(h, mbit) : !lab.Unshape(h)) {
      std::fprintf(stderr, "link_bench: cannot shape %s\n", h);
      return r;
    }
  }
  const std::string tessera = BuildPath("src/tessera"), core = lab.Ip("core"),
                    etcd = lab.EtcdEndpoint("core");
  const std::string job = "links" + std::to_string(n), run = dir + "/" + job;
  std::filesystem::create_directories(run);
  lab.Start("core", lab.EtcdArgv("core", run + "/etcd"), run + "/etcd.log");
  std::string out;
  const bool created = WaitUntil(
      [&] {
        return NetLab::Sh("ip netns exec " + lab.Ns("core") + " " + tessera + " job create --etcd " + etcd +
                              " --job " + job + " --pservers 2 --mode sync --optimizer " + setup.optimizer +
                              " --min-trainers 2 --wire " + setup.wire,
                          &out) == 0;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(200));
  if (!created) {
    std::fprintf(stderr, "link_bench: job create: %s\n", out.c_str());
    return r;
  }
  lab.Start("core",
            {tessera, "master", "--etcd", etcd, "--job", job, "--store", store, "--dataset", setup.dataset,
             "--passes", std::to_string(setup.passes), "--listen", "0.0.0.0", "--advertise", core},
            run + "/master.log");
  std::vector<Subprocess*> pservers, trainers;
  for (const char* h : {"ps0", "ps1"})
    pservers.push_back(
        &lab.Start(h, {tessera, "pserver", "--etcd", etcd, "--job", job}, run + "/" + h + ".log"));
  for (Subprocess* p : pservers) {
    if (!p->WaitForOutput("serving at", std::chrono::seconds(30))) {
      std::fprintf(stderr, "link_bench: a pserver did not serve: %s\n", p->Output().c_str());
      return r;
    }
  }
  const auto start = Now();
  for (int t = 0; t < 2; ++t) {
    const std::string h = "tr" + std::to_string(t);
    std::vector<std::string> argv = {tessera,        "train",
                                     "--etcd",       etcd,
                                     "--job",        job,
                                     "--model",      "mlp",
                                     "--trainer-id", std::to_string(t),
                                     "--store",      store,
                                     "--model-arg",  "hidden=" + std::to_string(setup.hidden)};
    if (setup.eval) argv.insert(argv.end(), {"--eval-dataset", "fm-test"});
    if (setup.pieces) argv.insert(argv.end(), {"--model-arg", "pieces=1"});
    trainers.push_back(&lab.Start(h, argv, run + "/" + h + ".log"));
  }
  static const std::regex evaluated("pass (\\d+) evaluated on fm-test:.* accuracy=([0-9.]+)");
  static const std::regex done(
      "trainer done: \\d+ steps, (\\d+) samples;.*"
      "read ([0-9.]+) s, compute ([0-9.]+) s, exchange ([0-9.]+) s, acknowledge ([0-9.]+) s");
  for (Subprocess* t : trainers) {
    auto code = t->Wait(std::chrono::seconds(900));
    std::smatch m;
    const std::string log = t->Output();
    if (!code || *code != 0 || !std::regex_search(log, m, done)) {
      std::fprintf(stderr, "link_bench: a trainer failed: %s\n", log.c_str());
      return r;
    }
    for (std::sregex_iterator it(log.begin(), log.end(), evaluated), end; it != end; ++it) {
      if (std::stoi((*it)[1]) == setup.passes) r.accuracy = std::stod((*it)[2]);
    }
    r.samples += std::stoll(m[1]);
    r.compute += std::stod(m[3]);
    r.exchange += std::stod(m[4]);
    r.training = std::max(r.training, std::stod(m[2]) + std::stod(m[3]) + std::stod(m[4]) + std::stod(m[5]));
  }
  r.seconds = std::chrono::duration<double>(Now() - start).count();
  return r;
}

int Main(int argc, char** argv) {
  CLI::App app{"link_bench: 2 trainers x 2 pservers of the mlp over links of a set rate (root only)"};
  std::vector<int> hidden = {256, 4096, 32768};
  std::vector<int64_t> mbits = {0, 10000, 1000};
  std::vector<std::string> wires = {"f32", "bf16", "topk:0.01"};
  Setup base;
  app.add_option("--hidden", hidden,
                 "the mlp's hidden units (one layer): 256 is 0.20 M parameters, 4096 is 3.3 M, 32768 is 26 M")
      ->delimiter(',');
  app.add_option("--mbit", mbits, "link rates in Mbit/s (0: unshaped)")->delimiter(',');
  app.add_option("--wire", wires, "wire formats, each against the first (f32) on the same link")
      ->delimiter(',');
  app.add_option("--dataset", base.dataset, "fm-test (10,000 images) or fm (60,000)")
      ->check(CLI::IsMember({"fm", "fm-test"}));
  app.add_option("--passes", base.passes, "passes over the data set")->check(CLI::Range(1, 100));
  app.add_option(
      "--optimizer", base.optimizer,
      "the job's optimizer (with sgd or adagrad, pulls in a topk or sign job carry only what changed)");
  app.add_flag("--eval", base.eval,
               "evaluate on fm-test after each pass; the table shows the last pass's accuracy");
  app.add_flag("--pieces", base.pieces,
               "the trainers push in pieces: w1 in ranges of blocks, each sent as soon as backward computes "
               "it (--model-arg pieces=1)");
  int rounds = 1;
  app.add_option("--rounds", rounds,
                 "runs of the whole --wire list on each link, one after another (each format against the "
                 "first of its round); with more than one, the median of each format's ratio follows")
      ->check(CLI::Range(1, 20));
  CLI11_PARSE(app, argc, argv);
  // Ctrl-C (or SIGTERM): every process on the hosts killed, the namespaces and files removed.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread starts: inherited
  NetLab lab;
  std::string dir_to_remove;
  std::mutex dir_mu;
  std::thread([&lab, &dir_to_remove, &dir_mu, stop] {
    int sig = 0;
    if (sigwait(&stop, &sig) != 0) return;
    std::fprintf(stderr, "link_bench: interrupted; stopping the job and removing its hosts\n");
    for (const char* h : kJobHosts) lab.KillHost(h);
    for (const char* ns : {"core", "ps0", "ps1", "tr0", "tr1", "sw", "probe"})
      (void)NetLab::Sh("ip netns del " + lab.Ns(ns) + " 2>/dev/null");
    std::lock_guard<std::mutex> lock(dir_mu);
    if (!dir_to_remove.empty()) (void)RemoveAll(dir_to_remove);
    std::_Exit(128 + sig);
  }).detach();
  std::string why;
  if (!lab.Open(&why)) {
    std::fprintf(stderr, "link_bench: network namespaces cannot be made here: %s\n", why.c_str());
    return 1;
  }
  int n = 1;
  for (const char* h : kJobHosts) {
    if (!lab.AddHost(h, n++)) return 1;
  }
  auto dir = MakeTempDir("link-bench-");
  if (!dir.ok()) return 1;
  {
    std::lock_guard<std::mutex> lock(dir_mu);
    dir_to_remove = *dir;
  }
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() { (void)RemoveAll(dir); }
  } remove_dir{*dir};
  const std::string store = *dir + "/store";
  std::string out;
  for (const auto& [name, file] : {std::pair<std::string, std::string>{"fm-test", "t10k"}, {"fm", "train"}}) {
    if (name != "fm-test" && name != base.dataset) continue;
    if (NetLab::Sh(BuildPath("src/tessera") + " upload --store " + store + " --dataset " + name +
                       " --format idx --images /usr/share/datasets/fashion-mnist/" + file +
                       "-images-idx3-ubyte.gz --labels /usr/share/datasets/fashion-mnist/" + file +
                       "-labels-idx1-ubyte.gz",
                   &out) != 0) {
      std::fprintf(stderr, "link_bench: upload: %s\n", out.c_str());
      return 1;
    }
  }
  std::printf("%d pass(es) over %s, 2 trainers x 2 pservers, sync, %s%s\n\n", base.passes,
              base.dataset.c_str(), base.optimizer.c_str(), base.pieces ? ", pushes in pieces" : "");
  std::printf(
      "| hidden | parameters (M) | link | wire | whole run (s) | training (s) | samples trained | samples/s "
      "| "
      "x %s | trainers' compute (s) | trainers' exchange (s) | accuracy |\n",
      wires.front().c_str());
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int k = 0;
  std::vector<std::string> summary;  // with --rounds: each link's medians, after the table
  for (int h : hidden) {
    const double params = (784.0 * h + h + 10.0 * h + 10) / 1e6;  // w1, b1, w2, b2
    for (int64_t mbit : mbits) {
      std::map<std::string, std::vector<double>> ratios;  // per format, one per round
      for (int round = 0; round < rounds; ++round) {
        double first = 0;
        for (const std::string& wire : wires) {
          Setup setup = base;
          setup.hidden = h;
          setup.mbit = mbit;
          setup.wire = wire;
          const Run r = OneRun(lab, *dir, store, setup, ++k);
          const std::string link =
              mbit > 0 ? std::to_string(mbit / 1000.0).substr(0, 4) + " Gbit/s" : "unshaped";
          const double rate = r.training > 0 ? r.samples / r.training : 0.0;
          if (wire == wires.front()) first = rate;
          std::printf("| %d | %.2f | %s | %s | %.1f | %.2f | %lld | %.0f | %.2f | %.2f | %.2f | %s |\n", h,
                      params, link.c_str(), wire.c_str(), r.seconds, r.training, r.samples, rate,
                      first > 0 ? rate / first : 0.0, r.compute, r.exchange,
                      r.accuracy >= 0 ? std::to_string(r.accuracy).substr(0, 6).c_str() : "-");
          std::fflush(stdout);
          if (first > 0) ratios[wire].push_back(rate / first);
        }
      }
      if (rounds > 1) {
        std::string line = "hidden " + std::to_string(h) + ", " +
                           (mbit > 0 ? std::to_string(mbit) + " Mbit/s" : std::string("unshaped")) +
                           ": the median x " + wires.front() + " over " + std::to_string(rounds) +
                           " rounds (range):";
        for (const std::string& wire : wires) {
          std::vector<double>& v = ratios[wire];
          if (v.empty()) continue;
          std::sort(v.begin(), v.end());
          const double median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
          char buf[96];
          std::snprintf(buf, sizeof buf, " %s %.2f (%.2f-%.2f);", wire.c_str(), median, v.front(), v.back());
          line += buf;
        }
        summary.push_back(line);
      }
    }
  }
  if (!summary.empty()) std::printf("\n");
  for (const std::string& line : summary) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace tessera::testing

int main(int argc, char** argv) { return tessera::testing::Main(argc, argv); }
